package state

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/runnerrelease"
)

// State is an instance's lifecycle state (docs/design.md).
type State string

const (
	Created    State = "created"
	Running    State = "running"
	Idle       State = "idle"
	Claimed    State = "claimed"
	Terminated State = "terminated"
)

// LiveStates are every state a record that is not terminated can be in, in
// lifecycle order: the pool-state index lists a pool's instances by them (a
// terminated record leaves it). Whatever counts, lists or accounts for a
// pool's live instances ranges over this list, so a new state is added here once.
var LiveStates = []State{Created, Claimed, Running, Idle, Stopped}

// Signal names written by the agent (docs/design.md).
const (
	SignalOK              = "UD_OK"
	SignalFailed          = "UD_FAILED"
	SignalRegOK           = "UD_REG_OK"
	SignalRegFailed       = "UD_REG_FAILED"
	SignalRemoveRegOK     = "UD_REMOVE_REG_OK"
	SignalRemoveRegFailed = "UD_REMOVE_REG_FAILED"
	SignalInterrupted     = "UD_INTERRUPTED"
	// SignalRebalance is EC2's rebalance recommendation for a spot
	// instance, the early sign of an interruption. Unlike the others it
	// outlives its assignment: once written, no claim takes the instance
	// again (HasRebalance).
	SignalRebalance          = "UD_REBALANCE"
	kindInstance             = "instance"
	terminatedRecordsKeepFor = 7 * 24 * time.Hour
)

// Signals lists every signal name the agent may write.
var Signals = []string{SignalOK, SignalFailed, SignalRegOK, SignalRegFailed, SignalRemoveRegOK, SignalRemoveRegFailed, SignalInterrupted, SignalRebalance, SignalJITNext}

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
	Purpose    string `dynamodbav:"purpose"` // PurposeRegister, PurposeRemove or PurposeJIT
	URL        string `dynamodbav:"url,omitempty"`
	Token      string `dynamodbav:"token"`
	ExpiresAt  int64  `dynamodbav:"expiresAt,omitempty"`
	// Labels are the runner's labels, comma-separated (register only);
	// empty: the record's runId, as before labels were minted.
	Labels string `dynamodbav:"labels,omitempty"`
	// Group is the runner group to join (register only); empty: the
	// default group.
	Group string `dynamodbav:"group,omitempty"`
	// A just-in-time configuration (Purpose PurposeJIT, see jit.go): the
	// value run.sh --jitconfig takes, its number in the assignment, and
	// the runner GitHub made for it.
	JITConfig  string `dynamodbav:"jitConfig,omitempty"`
	Seq        int    `dynamodbav:"seq,omitempty"`
	RunnerID   int64  `dynamodbav:"runnerId,omitempty"`
	RunnerName string `dynamodbav:"runnerName,omitempty"`
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
	Key                   Key    `dynamodbav:"pk"`
	Kind                  string `dynamodbav:"kind"`
	ID                    string `dynamodbav:"instanceId"`
	Pool                  string `dynamodbav:"pool"`
	Owner                 string `dynamodbav:"owner"`
	State                 State  `dynamodbav:"state"`
	PoolState             string `dynamodbav:"poolState,omitempty"`
	RunID                 string `dynamodbav:"runId,omitempty"`
	Assignment            string `dynamodbav:"assignment"`
	Threshold             int64  `dynamodbav:"threshold,omitempty"`
	LaunchedAt            int64  `dynamodbav:"launchedAt"`
	LaunchTemplateVersion string `dynamodbav:"launchTemplateVersion,omitempty"`
	// StoppedAt is when the control plane stopped the instance (Stop, its
	// clock); StartedAt when it last started it again (Start): liveness
	// judges a started instance's first beat from then, not from its
	// launch (NeverBeat).
	StoppedAt   int64 `dynamodbav:"stoppedAt,omitempty"`
	StartedAt   int64 `dynamodbav:"startedAt,omitempty"`
	HeartbeatAt int64 `dynamodbav:"heartbeatAt,omitempty"` // the agent's clock: shown, never judged
	// Heartbeats counts the agent's heartbeats. Liveness is judged by
	// whether it changes between two reads of the control plane, timed
	// by the control plane's clock (BeatSeen, BeatSeenAt), never by
	// comparing the agent's clock with ours.
	Heartbeats int64 `dynamodbav:"heartbeats,omitempty"`
	BeatSeen   int64 `dynamodbav:"beatSeen,omitempty"`
	BeatSeenAt int64 `dynamodbav:"beatSeenAt,omitempty"`
	// LeaseAt is when the control plane last set Threshold (its clock), so
	// the agent knows how long the lease was without trusting its clock.
	LeaseAt int64 `dynamodbav:"leaseAt,omitempty"`
	// LeaseCap bounds a running lease the agent extends (control plane
	// clock): the pool's runtime cap after the instance started running.
	LeaseCap int64 `dynamodbav:"leaseCap,omitempty"`
	// LeaseStep is the pool's maxRuntime in seconds: how far ahead the
	// agent keeps its running lease.
	LeaseStep int64 `dynamodbav:"leaseStep,omitempty"`
	// LeaseLimit is the latest threshold the control plane gave the
	// current state (control plane clock): the lease it set, or for a
	// running instance the cap the agent may extend to. Unlike threshold
	// and leaseCap it is outside AgentAttributes, so an instance cannot
	// move it; refresh retires a record whose threshold passes it
	// (liveness.go). 0 on records written before it existed.
	LeaseLimit int64 `dynamodbav:"leaseLimit,omitempty"`
	// LastRunID is the run the instance served last, kept by its release
	// (the control plane's; the instance role cannot name it): refresh
	// finds the job a spot interruption cost through it (rerun.go).
	LastRunID string `dynamodbav:"lastRunId,omitempty"`
	// StateAt is when the record entered its state SpanState (the
	// control plane's clock and copy: an instance can rewrite state), and
	// the prev* attributes the state it left at its last
	// transition, since when and for which run: the span the usage
	// ledger records (usage.go). All the control plane's.
	StateAt          int64             `dynamodbav:"stateAt,omitempty"`
	SpanState        State             `dynamodbav:"spanState,omitempty"`
	PrevState        State             `dynamodbav:"prevState,omitempty"`
	PrevStateAt      int64             `dynamodbav:"prevStateAt,omitempty"`
	PrevRunID        string            `dynamodbav:"prevRunId,omitempty"`
	Signals          map[string]Signal `dynamodbav:"signals"`
	InstanceType     string            `dynamodbav:"instanceType"`
	UsageClass       string            `dynamodbav:"usageClass"`
	RunnerName       string            `dynamodbav:"runnerName,omitempty"`
	GithubRunnerID   int64             `dynamodbav:"githubRunnerId,omitempty"`
	Registration     *Registration     `dynamodbav:"registration,omitempty"`
	PooledAt         int64             `dynamodbav:"pooledAt,omitempty"`
	Uses             int               `dynamodbav:"uses"`
	Version          int64             `dynamodbav:"version"`
	ExpiresAt        int64             `dynamodbav:"expiresAt,omitempty"`
	TerminatedReason string            `dynamodbav:"terminatedReason,omitempty"`
	// JITSeq is the number of the last just-in-time configuration written
	// for the assignment (jit.go).
	JITSeq int `dynamodbav:"jitSeq,omitempty"`
	// What bounds an instance's requests (jit.go, controlplane/jitcap.go),
	// all the control plane's (the instance role cannot name them):
	// JITAt is when it last took a request of the instance to GitHub (its
	// clock, unix seconds); JITServed the number of the assignment's last
	// runner it saw take a job; JITRefused the last request it refused;
	// JITMintedAt when it wrote configuration JITSeq (its clock).
	JITAt       int64       `dynamodbav:"jitAt,omitempty"`
	JITServed   int         `dynamodbav:"jitServed,omitempty"`
	JITRefused  *JITRefusal `dynamodbav:"jitRefused,omitempty"`
	JITMintedAt int64       `dynamodbav:"jitMintedAt,omitempty"`
	// JITRunners are the ids of the just-in-time runners the control
	// plane wrote configurations of since the instance's last claim
	// (jit.go), oldest first: what release deletes, whether or not the
	// agent still names them. The control plane's only (the instance role
	// cannot name it).
	JITRunners []int64 `dynamodbav:"jitRunners,omitempty"`
	// RunnerTarget is the actions/runner release the instance is to run
	// (the control plane's, runnerversion.go); RunnerVersion what its agent
	// says it has installed (the agent's: shown and judged for this
	// instance only).
	RunnerTarget  *runnerrelease.Target `dynamodbav:"runnerTarget,omitempty"`
	RunnerVersion string                `dynamodbav:"runnerVersion,omitempty"`
	// Forged lists the attributes found disagreeing with what the record's
	// key says (never stored): a sign that its instance rewrote them.
	Forged []string `dynamodbav:"-"`
}

// Key is the partition key of an instance's record. It is a type of its own
// so that an instance id is never passed where a key is wanted: the two
// differ whenever the pool's instance role is known.
type Key string

// InstanceKey is the key of the record of instance instanceID of a pool whose
// instance role has the id roleID (IAM's RoleId, AROA…): "<role id>:<instance
// id>", which is exactly ${aws:userid} of the instance-profile session EC2
// gives the instance. The instance role's policy allows only
// dynamodb:LeadingKeys = ${aws:userid}, so an instance reads and writes its
// own record and no other (docs/security.md, T2). Store.Create refuses an
// empty roleID.
func InstanceKey(roleID, instanceID string) Key {
	return Key(roleID + ":" + instanceID)
}

// RoleID is the instance role id the key starts with, "" for a key that
// is not an instance's.
func (k Key) RoleID() string {
	role, _, found := strings.Cut(string(k), ":")
	if !found {
		return ""
	}
	return role
}

// InstanceID is the instance id the key ends with.
func (k Key) InstanceID() string {
	_, id, found := strings.Cut(string(k), ":")
	if !found {
		return string(k)
	}
	return id
}

// UnmarshalDynamoDBAttributeValue decodes a record and takes its instance id
// from its key, whatever the instanceId attribute says: an instance can
// write into its own record (docs/security.md, T6), never into its key,
// which is <its role id>:<its instance id> (the role's policy allows no
// other). Every read of the package decodes through here, so no caller
// acts on an instance id the instance wrote. Forged notes the attribute
// when it disagreed.
func (i *Instance) UnmarshalDynamoDBAttributeValue(av types.AttributeValue) error {
	type plain Instance // without this method
	var p plain
	if err := attributevalue.Unmarshal(av, &p); err != nil {
		return err
	}
	*i = Instance(p)
	if i.Key.RoleID() != "" && i.ID != i.Key.InstanceID() {
		i.Forged = append(i.Forged, "instanceId="+i.ID)
		i.ID = i.Key.InstanceID()
	}
	return nil
}

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

// HasRebalance reports whether the agent ever said EC2 recommends
// rebalancing the instance, for any assignment: the recommendation is the
// instance's, not a run's, and only makes the instance less claimable.
func (i *Instance) HasRebalance() bool {
	_, ok := i.Signals[SignalRebalance]
	return ok
}

// Clean reports whether the agent confirmed it is deregistered and wiped for
// the current assignment, which makes an idle instance claimable.
func (i *Instance) Clean() bool {
	_, ok := i.SignalFor(SignalRemoveRegOK)
	return ok
}

// Pooled reports whether the instance is back in the pool: idle, bound to
// no run, and pooled by the control plane (PooledAt set by MarkPooled once the
// agent said clean). Tests and the sandbox wait on it; the claim's own
// condition is the DynamoDB expression in transitions.go.
func (i *Instance) Pooled() bool {
	return i.State == Idle && i.RunID == "" && i.PooledAt != 0
}

// Silent reports whether the agent's heartbeat counter has not moved for
// longer than staleAfter, as the control plane observed it (BeatSeenAt is
// written by the control plane with its own clock). An instance that never
// beat is judged by its EC2 launch time instead (see NeverBeat).
func (i *Instance) Silent(now time.Time, staleAfter time.Duration) bool {
	return i.Heartbeats != 0 && i.BeatSeenAt != 0 && i.Heartbeats == i.BeatSeen && now.Unix()-i.BeatSeenAt > int64(staleAfter/time.Second)
}

// NeverBeat reports whether the agent has not beaten once although the
// instance was launched (EC2's launch time) or last started from the
// stopped tier longer than bootTime ago.
func (i *Instance) NeverBeat(now time.Time, bootTime time.Duration) bool {
	return i.Heartbeats == 0 && now.Unix()-max(i.LaunchedAt, i.StartedAt) > int64(bootTime/time.Second)
}

// BeatUnobserved reports whether the control plane has yet to note the
// current value of the heartbeat counter (NoteBeat).
func (i *Instance) BeatUnobserved() bool {
	return i.Heartbeats != 0 && (i.BeatSeenAt == 0 || i.Heartbeats != i.BeatSeen)
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

// RunnerName is the name of an instance's runner at its nth use:
// ghr-<uses>-<instanceId>. The use count makes it unique to the assignment
// on the instance; it ends with the instance id, so that a runner can be
// matched to its instance by name.
func RunnerName(uses int, instanceID string) string {
	return "ghr-" + strconv.Itoa(uses) + "-" + instanceID
}
