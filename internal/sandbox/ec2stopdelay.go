package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// A stop reaches moto only once the instance has been stopping for
// StopDelay. moto stops an instance at once, and its DescribeInstances
// filters on its own state: a filter on instance-state-name "stopped"
// (provision's, before it starts a stopped instance) found an instance
// still stopping in the overlay, and the start EC2 then refused
// (IncorrectInstanceState) cost the instance (the benchmark of the tier
// found it). While moto says running, a filter on "stopped" leaves the
// instance out, as EC2's would; the overlay says stopping meanwhile, and
// keeps saying it until moto has the stop, so a start in between is
// refused as EC2 refuses one of a stopping instance.

// stopHeld is how long past StopDelay the overlay holds "stopping" at most
// while the stop is on its way to moto.
const stopHeld = time.Minute

// A stop that cannot reach moto is tried again this often, this far apart.
const (
	stopForwardTries = 20
	stopForwardPause = 250 * time.Millisecond
)

// stopLater answers a StopInstances of running instances as EC2 does
// (stopping) and sends it on to next once they have been stopping for the
// stop delay. It reports false, and does nothing, when one of ids is not
// running in moto (a stop of a stopped instance, one cut off earlier:
// moto answers it as it is).
func (s *Sandbox) stopLater(ctx context.Context, w http.ResponseWriter, r *http.Request, body []byte, ids []string, next http.Handler) bool {
	out, err := s.AWS.EC2().DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err != nil {
		return false
	}
	n := 0
	for _, res := range out.Reservations {
		for _, inst := range res.Instances {
			if inst.State == nil || inst.State.Name != types.InstanceStateNameRunning {
				return false
			}
			n++
		}
	}
	if n != len(ids) {
		return false
	}
	stop, _ := s.states.delays()
	for _, id := range ids {
		s.states.set(id, "stopping", codeStopping, stop+stopHeld)
	}
	later := r.Clone(context.Background())
	time.AfterFunc(stop, func() {
		defer func() {
			for _, id := range ids {
				s.states.clear(id)
			}
		}()
		// The stop must reach moto: an instance EC2 said was stopping
		// never comes back running. On a loaded machine a read or the
		// forward itself can fail; try again (the overlay holds
		// "stopping" meanwhile, up to stopHeld).
		for try := 0; try < stopForwardTries; try++ {
			if try > 0 {
				time.Sleep(stopForwardPause)
			}
			out, err := s.AWS.EC2().DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: ids})
			if err != nil {
				continue
			}
			// Terminated meanwhile: moto would mark it stopped again.
			for _, res := range out.Reservations {
				for _, inst := range res.Instances {
					if inst.State == nil || inst.State.Name != types.InstanceStateNameRunning {
						return
					}
				}
			}
			if rec := forward(next, later.Clone(context.Background()), body); rec.Code == http.StatusOK {
				return
			}
		}
	})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	w.Write(stoppingAnswer(ids))
	return true
}

// stoppingAnswer is StopInstances' answer for running instances now
// stopping (EC2 API Reference, StopInstances: StoppingInstances, each an
// InstanceStateChange; the query protocol names the list instancesSet).
func stoppingAnswer(ids []string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<StopInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>sandbox-stop</requestId><instancesSet>`)
	for _, id := range ids {
		fmt.Fprintf(&b, `<item><instanceId>%s</instanceId><previousState><code>16</code><name>running</name></previousState><currentState><code>%d</code><name>stopping</name></currentState></item>`,
			strings.TrimSpace(id), codeStopping)
	}
	b.WriteString(`</instancesSet></StopInstancesResponse>`)
	return b.Bytes()
}

// hostEC2 is the EC2 the instance host reads: moto's answers with the
// overlay's states. An agent starts again only once its instance's boot
// delay is over (pending, then running), as a guest OS boots once EC2 has
// the instance's hardware ready, and halts as its instance starts
// stopping; reading moto alone, the host started it as the start was
// asked, and the modelled boot was in no measure of stopped → online.
type hostEC2 struct {
	moto   *ec2.Client
	states *instanceStates
}

func (h hostEC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	out, err := h.moto.DescribeInstances(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	for i := range out.Reservations {
		for j := range out.Reservations[i].Instances {
			inst := &out.Reservations[i].Instances[j]
			if inst.InstanceId == nil {
				continue
			}
			if p, ok := h.states.current(*inst.InstanceId); ok {
				inst.State = &types.InstanceState{Name: types.InstanceStateName(p.name), Code: aws.Int32(int32(p.code))}
			}
		}
	}
	return out, nil
}
