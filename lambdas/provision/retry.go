package provision

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Capacity and quota errors (issue 37 item 5). EC2 answers a launch it
// cannot make now with InsufficientInstanceCapacity, UnfulfillableCapacity,
// MaxSpotInstanceCountExceeded, VcpuLimitExceeded and the like; its error
// reference says to wait a few minutes and try again, or to try other
// instance types or Availability Zones. Every launch already offers all the
// run's types in one subnet of each AZ (and the AZs' other subnets, and on
// demand for a spot pool with on_demand_fallback: internal/fleet); what is
// still missing is asked for again, with jittered exponential backoff,
// while a boot still fits the provision's deadline. A retry asks only for
// what is missing, and reserves it against maxInstances as the first
// launch did (create), so a run never gets more than it asked for and a
// pool never passes its cap. When the deadline comes first, the run's error
// says what was tried: types, AZs, usage classes, EC2's codes and how many
// launches.

// Backoff between launches: doubling from retryFirst up to retryMax, each
// wait drawn from its upper half (jitter: provisions that met the same
// shortage do not come back in step).
const (
	retryFirst = 2 * time.Second
	retryMax   = 20 * time.Second
)

// LaunchError is one error EC2 gave for one override of a launch.
type LaunchError struct {
	Code, Message, InstanceType, SubnetID, UsageClass string
}

// LaunchErrors are a launch's errors, and a summary of them for a message.
type LaunchErrors struct {
	Errors []LaunchError
	Detail string
}

// shortLaunch is create's error when EC2 launched fewer than asked.
type shortLaunch struct {
	got, asked int
	why        LaunchErrors
}

func (e *shortLaunch) Error() string {
	return fmt.Sprintf("EC2 launched %d of %d instances: %s", e.got, e.asked, e.why.Detail)
}

// retryable says whether the same launch a little later may get what err
// says EC2 did not give: every error of a short launch, or the error of a
// refused call, is about capacity, quota or free addresses.
func retryable(err error) bool {
	var short *shortLaunch
	if errors.As(err, &short) {
		if len(short.why.Errors) == 0 {
			return false
		}
		for _, e := range short.why.Errors {
			if !fleet.IsRetryableCode(e.Code) {
				return false
			}
		}
		return true
	}
	return err != nil && fleet.IsRetryableCode(awserr.Code(err))
}

// launch creates n instances, and again what is still missing while EC2
// answers for capacity or quota (retryable) and a boot still fits the
// deadline. It returns every member it added; its error, when the deadline
// came first, says what was tried.
func (p *provisioner) launch(ctx context.Context, n int, reg *state.Registration) ([]*member, error) {
	var got []*member
	wait := retryFirst
	for {
		members, err := p.create(ctx, n-len(got), reg)
		got = append(got, members...)
		if err == nil || !retryable(err) {
			return got, err
		}
		d := wait/2 + rand.N(wait/2+1)
		dl, _ := ctx.Deadline()
		if time.Until(dl) < state.D(p.req.pool.Timings.BootTime)+d {
			return got, p.launches().failure(n-len(got), n, err)
		}
		p.log.Warn("EC2 is short of capacity or quota: launching what is missing again", "missing", n-len(got), "wait", d.String(), "err", err)
		select {
		case <-ctx.Done():
			return got, p.launches().failure(n-len(got), n, err)
		case <-time.After(d):
		}
		wait = min(wait*2, retryMax)
	}
}

// launches is the provision's launchLog.
func (p *provisioner) launches() *launchLog {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tried == nil {
		p.tried = newLaunchLog(p.req.pool, p.req.types)
	}
	return p.tried
}

// launchLog is what a provision's launches tried, for its error.
type launchLog struct {
	zones map[string]string // subnet -> AZ, from the pool's config
	types []string

	mu       sync.Mutex
	launches int
	start    time.Time
	classes  map[string]bool
	azs      map[string]bool
	codes    map[string]int // "code (type in AZ, class)" -> times
	messages map[string]bool
}

func newLaunchLog(p *state.PoolConfig, types []string) *launchLog {
	return &launchLog{zones: p.SubnetZones, types: types, classes: map[string]bool{}, azs: map[string]bool{}, codes: map[string]int{}, messages: map[string]bool{}}
}

// note records one launch: how many it got and what EC2 said.
func (l *launchLog) note(got int, why LaunchErrors, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.launches == 0 {
		l.start = time.Now()
	}
	l.launches++
	for _, e := range why.Errors {
		az := l.zones[e.SubnetID]
		if az == "" {
			az = e.SubnetID
		}
		l.azs[az] = true
		l.classes[e.UsageClass] = true
		l.codes[fmt.Sprintf("%s (%s in %s, %s)", e.Code, e.InstanceType, az, e.UsageClass)]++
		// A capacity code says it all; a quota names its limit.
		if !fleet.IsEC2CapacityShortageCode(e.Code) && e.Message != "" {
			l.messages[e.Code+": "+e.Message] = true
		}
	}
	if awserr.Code(err) != "" {
		l.codes[awserr.Code(err)+" (the whole request)"]++
		if m := awserr.Message(err); m != "" {
			l.messages[awserr.Code(err)+": "+m] = true
		}
	}
}

// failure is the run's error when the deadline came before EC2 gave the
// missing instances: what was asked, what was tried, what EC2 said.
func (l *launchLog) failure(missing, asked int, last error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := func(m map[string]bool) string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return strings.Join(out, ", ")
	}
	codes := make([]string, 0, len(l.codes))
	for c, n := range l.codes {
		codes = append(codes, fmt.Sprintf("%s ×%d", c, n))
	}
	sort.Strings(codes)
	msg := fmt.Sprintf("EC2 did not give %d of %d instances before the provision's deadline: %d launches over %s tried instance types %s in %s as %s; EC2 answered %s",
		missing, asked, l.launches, time.Since(l.start).Round(time.Second), strings.Join(l.types, ", "), keys(l.azs), keys(l.classes), strings.Join(codes, "; "))
	if len(l.messages) > 0 {
		msg += " (" + keys(l.messages) + ")"
	}
	return &launchFailure{msg: msg, last: last}
}

// launchFailure is launch's error at the deadline; it wraps the last
// launch's error.
type launchFailure struct {
	msg  string
	last error
}

func (e *launchFailure) Error() string { return e.msg }
func (e *launchFailure) Unwrap() error { return e.last }
