package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/ec2capacity"
)

// Stopping and starting instances as EC2 does, where moto flips an
// instance to stopped or running at once (moto's Instance.stop and start):
//
//   - StopInstances puts an instance in "stopping" for StopDelay, then
//     "stopped" (the guest OS is shut down meanwhile: the instance host
//     ends its agent and runner when it stops seeing it running);
//   - StartInstances puts a stopped instance in "pending" for BootDelay
//     (EC2 moves it to running once its hardware is ready; its OS then
//     boots), then "running", when the instance host starts its agent
//     again on its kept disk;
//   - a stop or start of an instance in a state it cannot leave that way is
//     refused with IncorrectInstanceState (EC2 API Reference, "Error codes":
//     the resource is in an incorrect state for the request): starting a
//     stopping instance, stopping a pending one;
//   - a spot instance of a one-time request (every spot instance of an
//     instant CreateFleet, which is all the product launches) cannot be
//     stopped: EC2 answers UnsupportedOperation, "You can't stop the Spot
//     Instance '<id>' because it is associated with a one-time Spot
//     Instance request. You can only stop Spot Instances associated with
//     persistent Spot Instance requests." (EC2 User Guide, "Stop a Spot
//     Instance": only persistent requests' and maintain fleets' instances;
//     the message as users quote it);
//   - a start is refused for want of capacity or quota as a launch is
//     (ec2capacity.Model.StartRefusal), or when an injected fault says so
//     (Faults.StartRefused: the chaos suite's refused starts).
//
// The states are the sandbox's overlay on moto's: DescribeInstances
// answers show them (moto's StartInstances answer already says pending;
// a stop reaches moto only after the stop delay, ec2stopdelay.go, so that
// a filter on "stopped" is right); moto filters by its own state, so a
// filter on instance-state-name "running" sees a started instance a
// little early.

// StopDelay and BootDelay are how long an instance stays stopping and
// pending. Real stops take tens of seconds and starts about as long before
// the OS boots; the sandbox keeps them short and the order the same.
var (
	StopDelay = 1500 * time.Millisecond
	BootDelay = 2 * time.Second
)

// EC2 state codes (InstanceState, EC2 API Reference).
const (
	codePending  = 0
	codeStopping = 64
)

type passing struct {
	name  string
	code  int
	until time.Time
}

// instanceStates is the overlay: instances passing through stopping or
// pending, until when.
type instanceStates struct {
	mu  sync.Mutex
	now func() time.Time
	in  map[string]passing
	// stop and boot, when set, replace StopDelay and BootDelay (tests).
	stop, boot time.Duration
	// reclaimed are the spot instances EC2 took back (ec2reclaim.go).
	reclaimed map[string]bool
}

func (st *instanceStates) delays() (stop, boot time.Duration) {
	return cmp.Or(st.stop, StopDelay), cmp.Or(st.boot, BootDelay)
}

func (st *instanceStates) set(id, name string, code int, d time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.in == nil {
		st.in = map[string]passing{}
	}
	st.in[id] = passing{name: name, code: code, until: st.clock().Add(d)}
}

func (st *instanceStates) clock() time.Time {
	if st.now != nil {
		return st.now()
	}
	return time.Now()
}

// current is the overlay's state of id, if it is passing through one now.
func (st *instanceStates) current(id string) (passing, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	p, ok := st.in[id]
	if ok && !st.clock().Before(p.until) {
		delete(st.in, id)
		return passing{}, false
	}
	return p, ok
}

// clear ends id's passing state now.
func (st *instanceStates) clear(id string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.in, id)
}

// snapshot is the states passing now.
func (st *instanceStates) snapshot() map[string]passing {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := st.clock()
	out := make(map[string]passing, len(st.in))
	for id, p := range st.in {
		if now.Before(p.until) {
			out[id] = p
		}
	}
	return out
}

func (st *instanceStates) any() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.in) > 0 || len(st.reclaimed) > 0
}

// withInstanceStates plays stops and starts before next (moto, or what
// leads to it).
func (s *Sandbox) withInstanceStates(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
			next.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		form, _ := url.ParseQuery(string(body))
		action := form.Get("Action")
		if form.Get("DryRun") == "true" || action != "StopInstances" && action != "StartInstances" && action != "DescribeInstances" {
			next.ServeHTTP(w, r)
			return
		}
		if action == "DescribeInstances" {
			if !s.states.any() {
				next.ServeHTTP(w, r)
				return
			}
			// The states in force before moto is read: a stop that reaches
			// moto (and leaves the overlay) while moto answers this read
			// must not leave moto's older "running" unrewritten.
			before := s.states.snapshot()
			rec := forward(next, r, body)
			if rec.Code == http.StatusOK {
				rec.Body = bytes.NewBuffer(s.states.withReasons(s.states.rewrite(rec.Body.Bytes(), before)))
				rec.Header().Del("Content-Length")
			}
			copyAnswer(w, rec)
			return
		}
		ids := listed(form, "InstanceId")
		if code, msg := s.stateRefusal(r.Context(), action, ids); code != "" {
			ec2Error(w, code, msg)
			return
		}
		if action == "StopInstances" && s.stopLater(r.Context(), w, r, body, ids, next) {
			return // moto has it after the stop delay (ec2stopdelay.go)
		}
		// moto's answer already says stopping or pending (its
		// StoppingInstances/StartingInstances); only what follows differs.
		rec := forward(next, r, body)
		if rec.Code == http.StatusOK {
			stop, boot := s.states.delays()
			for _, id := range ids {
				if action == "StopInstances" {
					s.states.set(id, "stopping", codeStopping, stop)
				} else {
					s.states.set(id, "pending", codePending, boot)
				}
			}
		}
		copyAnswer(w, rec)
	})
}

// stateRefusal says why EC2 would refuse to stop or start ids.
func (s *Sandbox) stateRefusal(ctx context.Context, action string, ids []string) (code, msg string) {
	if len(ids) == 0 {
		return "", ""
	}
	out, err := s.AWS.EC2().DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return "", "" // moto answers the request as it would (an unknown id)
	}
	var first types.Instance
	for _, r := range out.Reservations {
		for _, inst := range r.Instances {
			if first.InstanceId == nil {
				first = inst
			}
			id := *inst.InstanceId
			state := inst.State.Name
			if p, ok := s.states.current(id); ok {
				state = types.InstanceStateName(p.name)
			}
			switch {
			case action == "StopInstances" && inst.InstanceLifecycle == types.InstanceLifecycleTypeSpot:
				return "UnsupportedOperation", fmt.Sprintf("You can't stop the Spot Instance '%s' because it is associated with a one-time Spot Instance request. You can only stop Spot Instances associated with persistent Spot Instance requests.", id)
			case action == "StopInstances" && state == types.InstanceStateNamePending:
				return "IncorrectInstanceState", fmt.Sprintf("The instance '%s' is not in a state from which it can be stopped.", id)
			case action == "StartInstances" && state == types.InstanceStateNameStopping:
				return "IncorrectInstanceState", fmt.Sprintf("The instance '%s' is not in a state from which it can be started.", id)
			case state == types.InstanceStateNameTerminated || state == types.InstanceStateNameShuttingDown:
				return "IncorrectInstanceState", fmt.Sprintf("The instance '%s' is not in a state from which it can be %s.", id, map[string]string{"StopInstances": "stopped", "StartInstances": "started"}[action])
			}
		}
	}
	s.mu.Lock()
	refused := s.faults.StartRefused
	s.mu.Unlock()
	if action == "StartInstances" && refused != nil && first.InstanceId != nil && refused(ids) {
		zone := ""
		if first.Placement != nil {
			zone = aws.ToString(first.Placement.AvailabilityZone)
		}
		return "InsufficientInstanceCapacity", ec2capacity.InsufficientCapacityMessage(string(first.InstanceType), zone)
	}
	if action == "StartInstances" && s.Capacity != nil {
		code, msg, err := s.Capacity.StartRefusal(ctx, ids)
		if err == nil && code != "" {
			return code, msg
		}
	}
	return "", ""
}

// listed reads a query API list parameter (Name.1, Name.2, …).
func listed(form url.Values, name string) []string {
	var out []string
	for i := 1; form.Has(fmt.Sprintf("%s.%d", name, i)); i++ {
		out = append(out, form.Get(fmt.Sprintf("%s.%d", name, i)))
	}
	return out
}

// stateRE finds an instance's id and its state in moto's DescribeInstances
// answer: moto writes the Instance shape's members in the model's order,
// instanceId before instanceState, with no other instanceId between them.
var stateRE = regexp.MustCompile(`<instanceId>(i-[0-9a-f]+)</instanceId>(?s:(.*?))<instanceState>\s*<code>\d+</code>\s*<name>[a-z-]+</name>\s*</instanceState>`)

// rewrite puts the overlay's states into a DescribeInstances answer.
func (st *instanceStates) rewrite(answer []byte, before map[string]passing) []byte {
	return stateRE.ReplaceAllFunc(answer, func(m []byte) []byte {
		sub := stateRE.FindSubmatch(m)
		p, ok := st.current(string(sub[1]))
		if !ok {
			// Passed while moto answered: moto's answer may predate it.
			p, ok = before[string(sub[1])]
		}
		if !ok {
			return m
		}
		return fmt.Appendf(nil, "<instanceId>%s</instanceId>%s<instanceState><code>%d</code><name>%s</name></instanceState>", sub[1], sub[2], p.code, p.name)
	})
}
