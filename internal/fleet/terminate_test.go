package fleet

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

const ghost = "i-0123456789abcdef0" // well formed, never launched

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func launchN(t *testing.T, n network, f *Fleet, count int) []string {
	t.Helper()
	res, err := f.Launch(ctx, n.request(count, OnDemand))
	must(t, err)
	return res.ids()
}

func TestTerminateInBatches(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	f.TerminateBatch = 4
	ids := launchN(t, n, f, 10)

	before := env.Calls("TerminateInstances")
	res, err := f.Terminate(ctx, append(ids, ids[0], ""))
	must(t, err)

	if calls := env.Calls("TerminateInstances") - before; calls != 3 {
		t.Errorf("%d TerminateInstances calls for 10 ids in batches of 4, want 3", calls)
	}
	if !reflect.DeepEqual(sorted(res.Terminated), sorted(ids)) || len(res.Gone) != 0 {
		t.Errorf("result %+v, want all 10 terminated", res)
	}
	live, err := f.List(ctx, Filter{})
	must(t, err)
	if len(live) != 0 {
		t.Errorf("%d instances still live", len(live))
	}
	if res, err := f.Terminate(ctx, nil); err != nil || len(res.Terminated)+len(res.Gone) != 0 || env.Calls("TerminateInstances")-before != 3 {
		t.Errorf("terminating nothing: %+v, %v", res, err)
	}
}

// moto, like EC2, refuses a whole TerminateInstances call when one id is
// unknown (InvalidInstanceID.NotFound) and terminates none of it.
func TestTerminateUnknownIDsAreGone(t *testing.T) {
	n := newNetwork(t)
	f, _ := newFleet(t, wrap(n.client))
	for _, c := range []struct {
		name  string
		batch int
		order func(live []string) []string
		calls int64
	}{
		// one batch: refused, then 4 single calls
		{"one batch", 4, func(l []string) []string { return []string{l[0], ghost, l[1], l[2]} }, 5},
		// first batch fine; second refused, then 2 single calls
		{"second batch", 2, func(l []string) []string { return []string{l[0], l[1], ghost, l[2]} }, 4},
		// a lone unknown id needs no second call
		{"alone", 1, func(l []string) []string { return []string{l[0], ghost, l[1], l[2]} }, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			live := launchN(t, n, f, 3)
			f.TerminateBatch = c.batch
			before := env.Calls("TerminateInstances")
			res, err := f.Terminate(ctx, c.order(live))
			must(t, err)
			if !reflect.DeepEqual(sorted(res.Terminated), sorted(live)) || !reflect.DeepEqual(res.Gone, []string{ghost}) {
				t.Errorf("result %+v, want %v terminated and %s gone", res, live, ghost)
			}
			if calls := env.Calls("TerminateInstances") - before; calls != c.calls {
				t.Errorf("%d TerminateInstances calls, want %d", calls, c.calls)
			}
			still, err := f.List(ctx, Filter{IDs: live, States: []string{"pending", "running"}})
			must(t, err)
			if len(still) != 0 {
				t.Errorf("%d instances still running", len(still))
			}
		})
	}
}

func TestTerminateGoesOnAfterAFailedBatch(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	f.TerminateBatch = 2
	ids := launchN(t, n, f, 4)
	w.terminate = func(ctx context.Context, in *ec2.TerminateInstancesInput, next func(context.Context, *ec2.TerminateInstancesInput) (*ec2.TerminateInstancesOutput, error)) (*ec2.TerminateInstancesOutput, error) {
		if slices.Contains(in.InstanceIds, ids[0]) {
			return nil, apiError("RequestLimitExceeded")
		}
		return next(ctx, in)
	}

	res, err := f.Terminate(ctx, ids)

	if err == nil || !IsThrottling(err) {
		t.Errorf("error %v, want the throttling of the first batch", err)
	}
	if !reflect.DeepEqual(sorted(res.Terminated), sorted(ids[2:])) || len(res.Gone) != 0 || w.count("TerminateInstances") != 2 {
		t.Errorf("result %+v after %d calls; want the second batch terminated after 2", res, w.count("TerminateInstances"))
	}
}

func TestTerminateMalformedIDInABatch(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	f, _ := newFleet(t, w)
	ids := launchN(t, n, f, 2)
	w.terminate = func(ctx context.Context, in *ec2.TerminateInstancesInput, next func(context.Context, *ec2.TerminateInstancesInput) (*ec2.TerminateInstancesOutput, error)) (*ec2.TerminateInstancesOutput, error) {
		if slices.Contains(in.InstanceIds, "i-bad") {
			return nil, apiError("InvalidInstanceID.Malformed")
		}
		return next(ctx, in)
	}
	res, err := f.Terminate(ctx, []string{ids[0], "i-bad", ids[1]})
	if awserr.Code(err) != "InvalidInstanceID.Malformed" || !reflect.DeepEqual(sorted(res.Terminated), sorted(ids)) || len(res.Gone) != 0 {
		t.Errorf("result %+v, %v; want both terminated and an error for i-bad", res, err)
	}
}

func TestTerminateDefaultBatch(t *testing.T) {
	w := wrap(nil)
	var sizes []int
	w.terminate = func(_ context.Context, in *ec2.TerminateInstancesInput, _ func(context.Context, *ec2.TerminateInstancesInput) (*ec2.TerminateInstancesOutput, error)) (*ec2.TerminateInstancesOutput, error) {
		sizes = append(sizes, len(in.InstanceIds))
		return &ec2.TerminateInstancesOutput{}, nil
	}
	var ids []string
	for i := 0; i < 250; i++ {
		ids = append(ids, fmt.Sprintf("i-%017x", i))
	}
	res, err := New(w, "env").Terminate(ctx, ids)
	must(t, err)
	if !reflect.DeepEqual(sizes, []int{100, 100, 50}) || len(res.Terminated) != 250 {
		t.Errorf("batches %v, %d terminated; want 100, 100, 50 and 250", sizes, len(res.Terminated))
	}
}
