package main

import (
	"fmt"
	"hash/crc32"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/ghrunner/terraform-provider-ghrunner/agent/config"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// The tests of this file play leases of a few seconds, the agent's clock
// off by five minutes either way (what the chaos suite injects) and
// DynamoDB outages, against the real agent binary.

type subtest struct {
	name string
	run  func(t *testing.T)
}

// sideBySide runs the subtests at the same time. They spend their time
// waiting for leases to run out, not computing, so the number of cores
// (-parallel's default) need not queue them: t.Run from goroutines.
func sideBySide(t *testing.T, tests ...subtest) {
	var wg sync.WaitGroup
	for _, st := range tests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(st.name, st.run)
		}()
	}
	wg.Wait()
}

// leaseStep is the pools' maxRuntime in these tests: the running lease
// MarkRunning sets and the agent keeps ahead. An agent whose clock is off
// counts the lease from when it first saw it and extends it half a step
// later, so the margin is half a step less how late it saw the lease and
// how long its write took: with 6 s, three seconds of that on a loaded
// machine (make test, four packages and four of these tests at once) made
// the lease lapse once. Production steps are minutes.
const leaseStep = 10 * time.Second

// leaseWorld is a world whose agent's clock is off by offset. Its runner
// is stopped within 2 s when the instance ends (the jobs of these tests
// ignore the stop and would hold it for the whole StopTimeout).
func leaseWorld(t *testing.T, offset time.Duration) *world {
	w := newWorld(t, "")
	w.configure(func(c *config.Config) {
		c.ClockOffset = config.Duration{Duration: offset}
		c.StopTimeout = config.Duration{Duration: 2 * time.Second}
	})
	return w
}

// running brings the world's agent to a running record with a job under way
// on its runner; it returns the record and the job.
func (w *world) running(runID string, step, runtimeCap time.Duration) (*state.Instance, int64) {
	w.t.Helper()
	inst := w.create(runID, "on-demand")
	w.start()
	got := w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
	rec, err := w.store.MarkRunning(ctx, got.Ref(), step, runtimeCap)
	must(w.t, err)
	job := w.fake.EnqueueJob(runID, "sleep 600")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if j, _ := w.fake.Job(job); j.State == fakegithub.JobRunning {
			break
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("the job did not start\nagent log:\n%s", w.logs.String())
		}
	}
	return rec, job
}

// alive fails the test when the agent has exited.
func (w *world) alive(why string) {
	w.t.Helper()
	select {
	case err := <-w.exited:
		w.t.Fatalf("the agent exited (%v) %s\nagent log:\n%s", err, why, w.logs.String())
	default:
	}
}

// terminatesWithin waits for the agent to terminate its instance.
func (w *world) terminatesWithin(d time.Duration) {
	w.t.Helper()
	select {
	case err := <-w.exited:
		if err != nil {
			w.t.Fatalf("agent exit: %v\nagent log:\n%s", err, w.logs.String())
		}
	case <-time.After(d):
		w.t.Fatalf("the agent did not terminate its instance within %s\nagent log:\n%s", d, w.logs.String())
	}
	out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{w.id}})
	must(w.t, err)
	if st := out.Reservations[0].Instances[0].State.Name; st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
		w.t.Fatalf("instance %s after the agent terminated it", st)
	}
}

// watchLease reads the record until the control plane's clock reaches
// until and checks that the running lease held all along, never passed its
// cap and stayed at most ahead seconds in front of the control plane's
// clock. It returns how often the threshold moved.
func (w *world) watchLease(until time.Time, ahead int64) (moves int) {
	w.t.Helper()
	last := int64(0)
	for time.Now().Before(until) {
		rec, err := w.store.Get(ctx, w.key)
		must(w.t, err)
		now := time.Now()
		switch {
		case rec.State != state.Running:
			w.t.Fatalf("record %s while the job runs", rec.State)
		case rec.Expired(now):
			w.t.Fatalf("the lease lapsed while the job ran: threshold %d, control plane clock %d\nagent log:\n%s", rec.Threshold, now.Unix(), w.logs.String())
		case rec.Threshold > rec.LeaseCap:
			w.t.Fatalf("threshold %d past the cap %d", rec.Threshold, rec.LeaseCap)
		case rec.Threshold > now.Unix()+ahead:
			w.t.Fatalf("threshold %d runs away: %d s ahead of the control plane's clock, want at most %d", rec.Threshold, rec.Threshold-now.Unix(), ahead)
		}
		if last != 0 && rec.Threshold != last {
			moves++
		}
		last = rec.Threshold
		w.alive("while its job ran and its lease held")
		time.Sleep(200 * time.Millisecond)
	}
	return moves
}

func TestAJobLongerThanMaxRuntimeKeepsItsLeaseUpToTheCap(t *testing.T) {
	t.Parallel()
	step := int64(leaseStep / time.Second)
	sideBySide(t,
		subtest{"agent clock 5 min slow", func(t *testing.T) {
			w := leaseWorld(t, -5*time.Minute)
			rec, job := w.running("run-slow", leaseStep, 24*time.Second)
			// Whole seconds: the threshold is at most one step and a second ahead.
			moves := w.watchLease(time.Unix(rec.LeaseCap, 0).Add(-time.Second), step+1)
			if moves < 3 {
				t.Fatalf("threshold moved %d times in %d s of a %d s lease", moves, rec.LeaseCap-rec.LeaseAt, step)
			}
			if j, _ := w.fake.Job(job); j.State != fakegithub.JobRunning {
				t.Fatalf("job %s before the cap", j.State)
			}
			got, err := w.store.Get(ctx, w.key)
			must(t, err)
			if got.Threshold != rec.LeaseCap {
				t.Fatalf("threshold %d at the end, want the cap %d", got.Threshold, rec.LeaseCap)
			}
			// At the cap (plus the grace) the agent gives its instance up.
			w.terminatesWithin(time.Until(time.Unix(rec.LeaseCap, 0)) + 8*time.Second)
		}},
		subtest{"agent clock 5 min fast", func(t *testing.T) {
			w := leaseWorld(t, 5*time.Minute)
			_, job := w.running("run-fast", leaseStep, time.Hour)
			// The agent's clock may lead it to keep the lease up to its
			// skew further ahead, never more.
			if moves := w.watchLease(time.Now().Add(16*time.Second), step+1+300); moves < 2 {
				t.Fatalf("threshold moved %d times in 16 s of a %d s lease", moves, step)
			}
			if j, _ := w.fake.Job(job); j.State != fakegithub.JobRunning {
				t.Fatalf("job %s", j.State)
			}
		}},
	)
}

func TestSelfTerminationCountsTheLeaseOnTheMonotonicClock(t *testing.T) {
	t.Parallel()
	sideBySide(t,
		subtest{"an agent 5 min fast keeps its instance while the lease holds", func(t *testing.T) {
			w := leaseWorld(t, 5*time.Minute)
			// By the agent's clock this lease ended 3.5 minutes ago.
			inst := w.createFor("run-fast", "on-demand", 90*time.Second)
			w.start()
			got := w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
			time.Sleep(3 * time.Second) // three self-termination checks
			w.alive("while its lease held")
			_, err := w.store.Expire(ctx, got.Ref(), "test")
			must(t, err)
			w.terminatesWithin(10 * time.Second)
		}},
		subtest{"an agent 5 min slow terminates itself after the grace once the control plane expired its lease", func(t *testing.T) {
			w := leaseWorld(t, -5*time.Minute)
			const grace = 3 * time.Second
			w.configure(func(c *config.Config) { c.ClockSkew = config.Duration{Duration: grace} })
			inst := w.create("run-slow", "on-demand")
			w.start()
			got := w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
			expired := time.Now()
			_, err := w.store.Expire(ctx, got.Ref(), "test")
			must(t, err)
			w.terminatesWithin(10 * time.Second)
			// Expire sets the threshold a second before leaseAt.
			if took := time.Since(expired); took < grace-time.Second {
				t.Fatalf("terminated %s after the expiry, before the grace of %s", took, grace)
			}
		}},
	)
}

// outage stands between the agent and DynamoDB: while down it answers
// every call with a 503, as DynamoDB does when it fails.
type outage struct {
	down atomic.Bool
	srv  *httptest.Server
}

func (w *world) dynamoDBOutage() *outage {
	w.t.Helper()
	target, err := url.Parse(env.URL)
	must(w.t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	o := &outage{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if o.down.Load() {
			body := `{"__type":"com.amazonaws.dynamodb.v20120810#ServiceUnavailableException","message":"injected outage"}`
			rw.Header().Set("Content-Type", "application/x-amz-json-1.0")
			rw.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
			rw.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(rw, body)
			return
		}
		proxy.ServeHTTP(rw, r)
	}))
	w.t.Cleanup(o.srv.Close)
	w.configure(func(c *config.Config) { c.Endpoints = map[string]string{"dynamodb": o.srv.URL} })
	return o
}

func TestADynamoDBOutageDoesNotCutAJobShortButTheLeaseStillEnds(t *testing.T) {
	t.Parallel()
	sideBySide(t,
		subtest{"a running job keeps its instance until the runtime cap", func(t *testing.T) {
			w := leaseWorld(t, 0)
			dynamo := w.dynamoDBOutage()
			rec, job := w.running("run-cut", 4*time.Second, 12*time.Second)
			time.Sleep(time.Second) // for the agent to read the running lease
			dynamo.down.Store(true)
			// The lease lapses in the record (refresh would end the instance);
			// the agent, its fail-safe, waits for the cap.
			for time.Now().Unix() < rec.LeaseCap {
				w.alive("during a DynamoDB outage, before the runtime cap")
				time.Sleep(200 * time.Millisecond)
			}
			if j, _ := w.fake.Job(job); j.State != fakegithub.JobRunning {
				t.Fatalf("job %s before the cap", j.State)
			}
			out, err := w.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{w.id}})
			must(t, err)
			if st := out.Reservations[0].Instances[0].State.Name; st != ec2types.InstanceStateNameRunning {
				t.Fatalf("instance %s before the runtime cap", st)
			}
			got, err := w.store.Get(ctx, w.key)
			must(t, err)
			if !got.Expired(time.Now()) {
				t.Fatalf("lease extended to %d during the outage", got.Threshold)
			}
			w.terminatesWithin(8 * time.Second)
		}},
		subtest{"an instance whose lease runs out terminates itself without DynamoDB", func(t *testing.T) {
			w := leaseWorld(t, 0)
			dynamo := w.dynamoDBOutage()
			// The agent counts the lease from its first sight of it: it is
			// waiting for its record when the record is created.
			w.start()
			inst := w.createFor("run-cut", "on-demand", 8*time.Second)
			w.wait(inst, state.SignalRegOK, state.SignalRegFailed)
			dynamo.down.Store(true)
			w.terminatesWithin(time.Until(time.Unix(inst.Threshold, 0)) + 6*time.Second)
		}},
	)
}
