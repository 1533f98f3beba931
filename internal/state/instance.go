package state

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// State is an instance's lifecycle state (seed detailed-design.md).
type State string

const (
	Created    State = "created"
	Running    State = "running"
	Idle       State = "idle"
	Claimed    State = "claimed"
	Terminated State = "terminated"
)

// Signal names written by the agent (DESIGN.md §4).
const (
	SignalOK                 = "UD_OK"
	SignalFailed             = "UD_FAILED"
	SignalRegOK              = "UD_REG_OK"
	SignalRegFailed          = "UD_REG_FAILED"
	SignalRemoveRegOK        = "UD_REMOVE_REG_OK"
	SignalRemoveRegFailed    = "UD_REMOVE_REG_FAILED"
	SignalInterrupted        = "UD_INTERRUPTED"
	kindInstance             = "instance"
	terminatedRecordsKeepFor = 7 * 24 * time.Hour
)

// Signals lists every signal name the agent may write.
var Signals = []string{SignalOK, SignalFailed, SignalRegOK, SignalRegFailed, SignalRemoveRegOK, SignalRemoveRegFailed, SignalInterrupted}

// Signal is one slot of the signals map: which assignment it answers, when,
// and the agent's detail (an error message for the FAILED signals).
type Signal struct {
	Assignment string `dynamodbav:"assignment"`
	At         int64  `dynamodbav:"at"`
	Detail     string `dynamodbav:"detail,omitempty"`
}

// Registration is the GitHub material the agent needs for its current
// assignment: a registration token while assigned, a remove token after
// release. It lives only in the instance's own record.
type Registration struct {
	Assignment string `dynamodbav:"assignment"`
	Purpose    string `dynamodbav:"purpose"` // "register" or "remove"
	URL        string `dynamodbav:"url,omitempty"`
	Token      string `dynamodbav:"token"`
	ExpiresAt  int64  `dynamodbav:"expiresAt,omitempty"`
}

// String keeps the token out of logs and error messages.
func (r *Registration) String() string {
	if r == nil {
		return "<none>"
	}
	return "registration{" + r.Purpose + " for " + r.Assignment + ", token redacted}"
}

// Instance is the record of one EC2 instance. Timestamps are unix seconds,
// stored as numbers so that comparisons in conditions are numeric.
type Instance struct {
	Key                   string            `dynamodbav:"pk"`
	Kind                  string            `dynamodbav:"kind"`
	ID                    string            `dynamodbav:"instanceId"`
	Pool                  string            `dynamodbav:"pool"`
	Owner                 string            `dynamodbav:"owner"`
	State                 State             `dynamodbav:"state"`
	PoolState             string            `dynamodbav:"poolState,omitempty"`
	RunID                 string            `dynamodbav:"runId,omitempty"`
	Assignment            string            `dynamodbav:"assignment"`
	Threshold             int64             `dynamodbav:"threshold,omitempty"`
	LaunchedAt            int64             `dynamodbav:"launchedAt"`
	LaunchTemplateVersion string            `dynamodbav:"launchTemplateVersion,omitempty"`
	HeartbeatAt           int64             `dynamodbav:"heartbeatAt,omitempty"`
	Signals               map[string]Signal `dynamodbav:"signals"`
	InstanceType          string            `dynamodbav:"instanceType"`
	UsageClass            string            `dynamodbav:"usageClass"`
	RunnerName            string            `dynamodbav:"runnerName,omitempty"`
	GithubRunnerID        int64             `dynamodbav:"githubRunnerId,omitempty"`
	Registration          *Registration     `dynamodbav:"registration,omitempty"`
	PooledAt              int64             `dynamodbav:"pooledAt,omitempty"`
	Uses                  int               `dynamodbav:"uses"`
	Version               int64             `dynamodbav:"version"`
	ExpiresAt             int64             `dynamodbav:"expiresAt,omitempty"`
	TerminatedReason      string            `dynamodbav:"terminatedReason,omitempty"`
}

// InstanceKey is the partition key of an instance's record. Every access goes
// through it so that the key shape can change (e.g. to suit an IAM policy
// variable) in one place.
func InstanceKey(instanceID string) string { return instanceID }

// PoolState is the partition key of the by-pool-state index.
func PoolState(pool string, s State) string { return pool + "#" + string(s) }

// SignalFor returns the named signal only when it answers the record's current
// assignment: a signal left over from an earlier assignment does not count.
func (i *Instance) SignalFor(name string) (Signal, bool) {
	s, ok := i.Signals[name]
	if !ok || s.Assignment != i.Assignment || i.Assignment == "" {
		return Signal{}, false
	}
	return s, true
}

// Clean reports whether the agent confirmed it is deregistered and wiped for
// the current assignment, which makes an idle instance claimable.
func (i *Instance) Clean() bool {
	_, ok := i.SignalFor(SignalRemoveRegOK)
	return ok
}

// Expired reports whether the lease of the current state has passed.
func (i *Instance) Expired(now time.Time) bool {
	return i.Threshold != 0 && i.Threshold <= now.Unix()
}

// NewAssignment mints the id that binds signals and tokens to one create,
// claim or release of an instance.
func NewAssignment() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // never happens on Linux
	}
	return hex.EncodeToString(b[:])
}
