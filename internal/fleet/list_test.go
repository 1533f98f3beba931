package fleet

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// launchSeven makes seven launches of two instances: pools linux (4) and
// windows (3), owners alternating acme and acme/api. moto answers each
// on-demand launch with one reservation, and pages DescribeInstances by
// reservation: seven reservations for PageSize 5 make two pages.
func launchSeven(t *testing.T, n network, f *Fleet) []Launched {
	t.Helper()
	var all []Launched
	for i := 0; i < 7; i++ {
		req := n.request(2, OnDemand)
		if i >= 4 {
			req.Pool = "windows"
		}
		if i%2 == 1 {
			req.Owner = "acme/api"
		}
		res, err := f.Launch(ctx, req)
		must(t, err)
		all = append(all, res.Instances...)
	}
	return all
}

func TestListReadsEveryPage(t *testing.T) {
	n := newNetwork(t)
	f, _ := newFleet(t, wrap(n.client))
	launched := launchSeven(t, n, f)

	f.PageSize = 5
	before := env.Calls("DescribeInstances")
	small, err := f.List(ctx, Filter{})
	must(t, err)
	smallPages := env.Calls("DescribeInstances") - before

	f.PageSize = DefaultPageSize
	before = env.Calls("DescribeInstances")
	big, err := f.List(ctx, Filter{})
	must(t, err)
	bigPages := env.Calls("DescribeInstances") - before

	want := idsOf(launched, launchedID)
	if got := idsOf(small, instanceID); !reflect.DeepEqual(got, want) {
		t.Errorf("PageSize 5 listed %d instances, want the %d launched", len(got), len(want))
	}
	if got := idsOf(big, instanceID); !reflect.DeepEqual(got, want) {
		t.Errorf("PageSize %d listed %d instances, want the %d launched", DefaultPageSize, len(got), len(want))
	}
	// moto filters first, then pages by reservation: 7 reservations, 5 a page.
	if smallPages != 2 || bigPages != 1 {
		t.Errorf("DescribeInstances calls: %d with PageSize 5 (want 2), %d with %d (want 1)", smallPages, bigPages, DefaultPageSize)
	}
}

func TestListFilters(t *testing.T) {
	n := newNetwork(t)
	f, _ := newFleet(t, wrap(n.client))
	f.PageSize = 5
	launched := launchSeven(t, n, f)

	count := func(flt Filter) int {
		t.Helper()
		got, err := f.List(ctx, flt)
		must(t, err)
		return len(got)
	}
	for _, c := range []struct {
		name string
		flt  Filter
		want int
	}{
		{"all", Filter{}, 14},
		{"pool", Filter{Pool: "linux"}, 8},
		{"owner", Filter{Owner: "acme/api"}, 6},
		{"pool and owner", Filter{Pool: "windows", Owner: "acme/api"}, 2},
		{"unknown pool", Filter{Pool: "macos"}, 0},
		{"ids", Filter{IDs: []string{launched[0].InstanceID, launched[5].InstanceID}}, 2},
		{"ids and pool", Filter{IDs: []string{launched[0].InstanceID, launched[13].InstanceID}, Pool: "windows"}, 1},
		{"unknown id is absent, not an error", Filter{IDs: []string{"i-0123456789abcdef0", launched[1].InstanceID}}, 1},
	} {
		if got := count(c.flt); got != c.want {
			t.Errorf("%s: listed %d, want %d", c.name, got, c.want)
		}
	}

	// Another deployment's fleet sees none of them, even by id.
	other := New(n.client, "another-environment")
	got, err := other.List(ctx, Filter{IDs: []string{launched[0].InstanceID}})
	must(t, err)
	all, err := other.List(ctx, Filter{})
	must(t, err)
	if len(got) != 0 || len(all) != 0 {
		t.Errorf("another environment lists %d by id, %d in all", len(got), len(all))
	}

	// States: a terminated instance leaves the default listing.
	gone := launched[2].InstanceID
	_, err = n.client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{gone}})
	must(t, err)
	if got := count(Filter{}); got != 13 {
		t.Errorf("after one termination the live listing has %d, want 13", got)
	}
	terminated, err := f.List(ctx, Filter{States: []string{"shutting-down", "terminated"}})
	must(t, err)
	if len(terminated) != 1 || terminated[0].ID != gone {
		t.Errorf("terminated listing %+v, want just %s", terminated, gone)
	}
	_, err = f.List(ctx, Filter{States: []string{"running", "runing"}})
	var ve *fielderr.Error
	if !errors.As(err, &ve) || ve.Field != "States[1]" {
		t.Errorf("a misspelt state: %v", err)
	}
	if _, err := New(n.client, "").List(ctx, Filter{}); !errors.As(err, &ve) || ve.Field != "environment" {
		t.Errorf("a fleet without environment listed: %v", err)
	}
}

func TestListDescribesAnInstance(t *testing.T) {
	n := newNetwork(t)
	f, _ := newFleet(t, wrap(n.client))
	res, err := f.Launch(ctx, n.request(1, Spot))
	must(t, err)
	listed, err := f.List(ctx, Filter{})
	must(t, err)
	if len(listed) != 1 {
		t.Fatalf("listed %d", len(listed))
	}
	got := listed[0]
	if got.ID != res.Instances[0].InstanceID || got.InstanceType != testTypes[0] || got.State != "running" || got.SubnetID != n.subnets[0] ||
		got.AZ != n.azs[0] || got.UsageClass != Spot || got.LaunchTime.IsZero() {
		t.Errorf("listed %+v", got)
	}
	want := map[string]string{TagEnvironment: f.Environment(), TagPool: "linux", TagOwner: "acme", TagAssignment: "as-1", "team": "ci"}
	if !reflect.DeepEqual(got.Tags, want) {
		t.Errorf("tags %v, want %v", got.Tags, want)
	}
}

// The instance-id filter is split so that no request carries more filter
// values than EC2 accepts (200).
func TestListSplitsManyIDs(t *testing.T) {
	n := newNetwork(t)
	w := wrap(n.client)
	most := 0
	w.describe = func(ctx context.Context, in *ec2.DescribeInstancesInput, next func(context.Context, *ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error)) (*ec2.DescribeInstancesOutput, error) {
		values := 0
		for _, flt := range in.Filters {
			values += len(flt.Values)
		}
		most = max(most, values)
		return next(ctx, in)
	}
	f, _ := newFleet(t, w)
	res, err := f.Launch(ctx, n.request(2, OnDemand))
	must(t, err)
	var ids []string
	for i := 0; i < 400; i++ {
		ids = append(ids, fmt.Sprintf("i-%017x", i))
	}
	ids = append(ids, res.ids()...)
	got, err := f.List(ctx, Filter{IDs: ids})
	must(t, err)
	if len(got) != 2 || most > 200 {
		t.Errorf("%d ids: found %d, at most %d filter values in one request; want 2 found and at most 200", len(ids), len(got), most)
	}
}

// BenchmarkList lists 20 instances in pages of 5 (one reservation each).
func BenchmarkList(b *testing.B) {
	n := newNetwork(b)
	f, _ := newFleet(b, wrap(n.client))
	for i := 0; i < 20; i++ {
		_, err := f.Launch(ctx, n.request(1, OnDemand))
		must(b, err)
	}
	f.PageSize = 5
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := f.List(ctx, Filter{Pool: "linux"})
		if err != nil || len(got) != 20 {
			b.Fatalf("listed %d: %v", len(got), err)
		}
	}
}
