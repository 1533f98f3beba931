package cost

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakepricing"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

const region = awstest.Region

// prices are the fake price list's: c7i.large on demand, gp3 per GB-month.
func pricesOn(t *testing.T, fake *fakepricing.Server) *Prices {
	t.Helper()
	opts := env.Options()
	opts.Endpoints = map[string]string{"pricing": fake.URL}
	cfg, err := awsconf.Load(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &Prices{Region: region, Pricing: cfg.Pricing(), EC2: cfg.EC2()}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-5 }

func span(st state.State, run string, from, to int64, class string) state.Span {
	return state.Span{InstanceID: "i-1", Pool: "linux", RunID: run, State: st, From: from, To: to,
		InstanceType: "c7i.large", UsageClass: class}
}

func TestTheReportPricesEachStatesSecondsAtTheListPrice(t *testing.T) {
	fake := fakepricing.New(fakepricing.Linux(region, "c7i.large", "0.0893000000"), fakepricing.Volume(region, "gp3", "0.0800000000"))
	defer fake.Close()
	spans := []state.Span{span(state.Running, "r1", 1000, 1600, "on-demand"), span(state.Idle, "", 1600, 2500, "on-demand"),
		span(state.Stopped, "", 2500, 6100, "on-demand")}
	vols := map[string]state.RootVolume{"linux": {GiB: 30, Type: "gp3"}}
	r := Build(ctx, spans, nil, vols, pricesOn(t, fake), time.Unix(0, 0), time.Unix(10000, 0), ByPool)
	row := r.Rows[0]
	if row.JobSeconds != 600 || row.WarmSeconds != 900 || row.StoppedSeconds != 3600 {
		t.Fatalf("seconds = %d job, %d warm, %d stopped; want 600, 900, 3600", row.JobSeconds, row.WarmSeconds, row.StoppedSeconds)
	}
	wantInst := 0.0893 * 1500 / 3600 // a stopped instance's compute is free
	wantVol := 0.08 * 30 * 5100 / (730 * 3600)
	if row.InstanceUSD == nil || !near(*row.InstanceUSD, wantInst) || row.VolumeUSD == nil || !near(*row.VolumeUSD, wantVol) || !near(*row.TotalUSD, wantInst+wantVol) {
		t.Fatalf("row = %+v, want instance %.6f and volume %.6f", row, wantInst, wantVol)
	}
	// Each price is asked once, however many spans need it.
	if fake.Calls() != 2 {
		t.Fatalf("price list calls = %d, want 2 (one per price)", fake.Calls())
	}
}

func TestAPriceListThatFailsLeavesTheRowsWithoutAPriceNeverZero(t *testing.T) {
	fake := fakepricing.New(fakepricing.Linux(region, "c7i.large", "0.0893"), fakepricing.Volume(region, "gp3", "0.08"))
	defer fake.Close()
	fake.Fail("AccessDeniedException")
	r := Build(ctx, []state.Span{span(state.Running, "r1", 0, 600, "on-demand")}, nil,
		map[string]state.RootVolume{"linux": {GiB: 30, Type: "gp3"}}, pricesOn(t, fake), time.Unix(0, 0), time.Unix(10000, 0), ByRun)
	row := r.Rows[0]
	if row.InstanceUSD != nil || row.VolumeUSD != nil || row.TotalUSD != nil || row.JobSeconds != 600 {
		t.Fatalf("row = %+v, want seconds and no price", row)
	}
	if why := strings.Join(row.Unpriced, "; "); !strings.Contains(why, "AccessDeniedException") || !strings.Contains(why, "ebs gp3") {
		t.Fatalf("unpriced = %q, want both prices' failure named", why)
	}
}

func TestAnInstanceTypeMissingFromThePriceListHasNoPrice(t *testing.T) {
	fake := fakepricing.New(fakepricing.Volume(region, "gp3", "0.08"))
	defer fake.Close()
	r := Build(ctx, []state.Span{span(state.Running, "r1", 0, 600, "on-demand")}, nil,
		map[string]state.RootVolume{"linux": {GiB: 30, Type: "gp3"}}, pricesOn(t, fake), time.Unix(0, 0), time.Unix(10000, 0), ByRun)
	row := r.Rows[0]
	if row.InstanceUSD != nil || row.TotalUSD != nil || row.VolumeUSD == nil || !strings.Contains(strings.Join(row.Unpriced, ";"), "no product") {
		t.Fatalf("row = %+v, want the volume priced and the instance not, saying the product is missing", row)
	}
}

func TestAVolumeTypeMissingFromThePriceListHasNoPrice(t *testing.T) {
	fake := fakepricing.New(fakepricing.Linux(region, "c7i.large", "0.0893"))
	defer fake.Close()
	r := Build(ctx, []state.Span{span(state.Stopped, "", 0, 600, "on-demand")}, nil,
		map[string]state.RootVolume{"linux": {GiB: 30, Type: "io2"}}, pricesOn(t, fake), time.Unix(0, 0), time.Unix(10000, 0), ByPool)
	row := r.Rows[0]
	if row.VolumeUSD != nil || row.TotalUSD != nil || !strings.Contains(strings.Join(row.Unpriced, ";"), "ebs io2") {
		t.Fatalf("row = %+v, want no volume price, naming io2", row)
	}
}

// moto answers DescribeSpotPriceHistory with 0.00001 for each zone that
// offers the type (moto/ec2/responses/spot_instances.py) and nothing for a
// type it does not know.
func TestSpotIsPricedFromTheSpotPriceHistoryAndAnEmptyHistoryHasNoPrice(t *testing.T) {
	fake := fakepricing.New(fakepricing.Volume(region, "gp3", "0.08"))
	defer fake.Close()
	known := span(state.Running, "r1", 0, 3600, "spot")
	known.InstanceType = "m5.large"
	unknown := span(state.Running, "r2", 0, 3600, "spot")
	unknown.InstanceType = "zz9.nonesuch"
	r := Build(ctx, []state.Span{known, unknown}, nil, map[string]state.RootVolume{"linux": {GiB: 8, Type: "gp3"}},
		pricesOn(t, fake), time.Unix(0, 0), time.Unix(10000, 0), ByRun)
	if got := r.Rows[0]; got.Key != "r1" || got.InstanceUSD == nil || !near(*got.InstanceUSD, 0.00001) {
		t.Fatalf("row r1 = %+v, want an hour at moto's 0.00001", got)
	}
	if got := r.Rows[1]; got.InstanceUSD != nil || !strings.Contains(strings.Join(got.Unpriced, ";"), "spot price history of zz9.nonesuch") {
		t.Fatalf("row r2 = %+v, want no price, naming the empty history", got)
	}
}

// oneRate prices everything at one rate: the queue tests need no price list.
type oneRate struct{}

func (oneRate) Hourly(context.Context, string, string) (float64, error) { return 0.1, nil }
func (oneRate) VolumeMonthly(context.Context, string) (float64, error)  { return 0.08, nil }

// A provisioned run queues from its item to its first runner online; a
// scale set's standing run, whose item and runner come before its job,
// queues as its JobStarted message says (QueueTime to RunnerAssignTime),
// and not at all when the message lacked a stamp.
func TestARunsQueueTimeIsItsProvisionsWaitOrItsScaleSetJobsMessageStamps(t *testing.T) {
	spans := []state.Span{
		{InstanceID: "i-1", Pool: "linux", RunID: "wf", State: state.Created, Next: state.Running, From: 1000, To: 1070, InstanceType: "c7i.large", UsageClass: "on-demand"},
		{InstanceID: "i-2", Pool: "linux", RunID: "ss", State: state.Created, Next: state.Running, From: 1000, To: 1090, InstanceType: "c7i.large", UsageClass: "on-demand"},
		{InstanceID: "i-3", Pool: "linux", RunID: "ss-nostamp", State: state.Created, Next: state.Running, From: 1000, To: 1030, InstanceType: "c7i.large", UsageClass: "on-demand"},
	}
	job := &state.RunJob{QueuedAt: 5000, StartedAt: 5012}
	q, ok := job.QueueSeconds()
	runs := map[string]*RunInfo{
		"wf":         {Repository: "acme/app", CreatedAt: 990},
		"ss":         {Repository: "acme/app", CreatedAt: 900, ScaleSet: true, JobQueue: q, JobQueueOK: ok},
		"ss-nostamp": {Repository: "acme/app", CreatedAt: 900, ScaleSet: true},
	}
	r := Build(ctx, spans, runs, map[string]state.RootVolume{"linux": {GiB: 8, Type: "gp3"}}, oneRate{}, time.Unix(0, 0), time.Unix(10000, 0), ByRun)
	got := map[string]*Row{}
	for _, row := range r.Rows {
		got[row.Key] = row
	}
	if row := got["wf"]; row == nil || row.QueuedRuns != 1 || row.QueueMaxSeconds != 80 || row.HostedMinutesEst != 3 {
		t.Errorf("provisioned run: %+v, want 80 s queued (990 to 1070) and 2+1 hosted minutes", row)
	}
	if row := got["ss"]; row == nil || row.QueuedRuns != 1 || row.QueueMaxSeconds != 12 || row.HostedMinutesEst != 0 {
		t.Errorf("scale-set run: %+v, want the message's 12 s and no hosted minutes", row)
	}
	if row := got["ss-nostamp"]; row == nil || row.QueuedRuns != 0 || row.QueueMaxSeconds != 0 {
		t.Errorf("scale-set run without stamps: %+v, want no queue time", row)
	}
	if _, ok := (&state.RunJob{QueuedAt: 5000, StartedAt: 4990}).QueueSeconds(); ok {
		t.Error("stamps out of order gave a queue time")
	}
}
