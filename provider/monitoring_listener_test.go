package provider

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/listener"
)

// The listener alarm, evaluated as CloudWatch would on the EMF lines the
// listener writes (listener.ReportLines: four reports a minute, each of
// the polls answered since the last). Each minute below lists the polls
// of its four reports; nil is a minute without a line (the listener dead).
func TestTheListenerAlarmGoesOffWhenPollsStopAndStaysQuietWhileTheyCome(t *testing.T) {
	const env = "ci"
	at := time.Unix(1_800_000_000, 0)
	minute := func(t *testing.T, polls ...int) []metrics.Point {
		var lines bytes.Buffer
		for i, n := range polls {
			// Two scale sets: linux's alarm watches linux's polls.
			for _, pool := range []string{"linux", "gpu"} {
				b, err := listener.ReportLines(env, pool, at.Add(time.Duration(i)*15*time.Second), n)
				if err != nil {
					t.Fatal(err)
				}
				lines.Write(b)
			}
		}
		points, err := metrics.Read(&lines)
		if err != nil {
			t.Fatal(err)
		}
		return points
	}
	spec := monitoringSpec{Name: "ci", Environment: env, Pools: []string{"linux", "gpu"}, MissRatio: 0.5, RateLimitLow: 500, ScaleSetPools: []string{"linux", "gpu"}}
	var polls alarm
	for _, a := range spec.alarms() {
		if aws.ToString(a.AlarmName) == "ci-listener-polls-linux" {
			polls = a
		}
	}
	if polls.AlarmName == nil {
		t.Fatalf("no listener alarm among %q", spec.alarmNames())
	}
	for _, c := range []struct {
		name    string
		minutes [][]int
		fires   bool
	}{
		{"polls answer every minute (GitHub holds each about 50 s)", [][]int{{1, 0, 0, 1}, {0, 1, 0, 0}, {0, 0, 1, 0}}, false},
		{"the listener stuck: its reports say no poll for two minutes", [][]int{{1, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}}, true},
		{"the listener dead: no line for two minutes", [][]int{{1, 1, 0, 0}, nil, nil}, true},
		{"one minute without a line, then polls again (a restart)", [][]int{{1, 0, 0, 0}, nil, {0, 1, 0, 0}}, false},
		{"one minute without a poll is not two", [][]int{{0, 0, 0, 0}, {0, 0, 0, 1}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var periods [][]metrics.Point
			for _, m := range c.minutes {
				periods = append(periods, minute(t, m...))
			}
			if got := alarmFires(polls, periods); got != c.fires {
				t.Errorf("the listener alarm fires: %v, want %v", got, c.fires)
			}
		})
	}
}

// One scale set GitHub keeps refusing (its polls stop) while the
// listener polls the other's alarms, on the refused one's alarm alone.
// Checked: with one alarm over the listener's polls (the sum without the
// pool, as before), the other scale set's polls kept it quiet and this
// failed.
func TestAScaleSetNobodyPollsAlarmsWhileTheListenerPollsAnother(t *testing.T) {
	const env = "ci"
	at := time.Unix(1_800_000_000, 0)
	minute := func(t *testing.T, linux, gpu int) []metrics.Point {
		var lines bytes.Buffer
		for pool, n := range map[string]int{"linux": linux, "gpu": gpu} {
			b, err := listener.ReportLines(env, pool, at, n)
			if err != nil {
				t.Fatal(err)
			}
			lines.Write(b)
		}
		points, err := metrics.Read(&lines)
		if err != nil {
			t.Fatal(err)
		}
		return points
	}
	spec := monitoringSpec{Name: "ci", Environment: env, Pools: []string{"linux", "gpu"}, MissRatio: 0.5, RateLimitLow: 500, ScaleSetPools: []string{"gpu", "linux"}}
	periods := [][]metrics.Point{minute(t, 1, 0), minute(t, 2, 0), minute(t, 1, 0)}
	var firing []string
	for _, a := range spec.alarms() {
		if alarmFires(a, periods) {
			firing = append(firing, aws.ToString(a.AlarmName))
		}
	}
	if !slices.Equal(firing, []string{"ci-listener-polls-gpu"}) {
		t.Errorf("alarms firing %q, want only gpu's listener alarm", firing)
	}
}

// The alarms exist only for the pools that serve a scale set: one without
// polls nothing, and would page for ever.
func TestOnlyAPoolServingAScaleSetHasAListenerAlarm(t *testing.T) {
	without := monitoringSpec{Name: "ci", Environment: "ci", Pools: []string{"linux", "gpu"}, MissRatio: 0.5, RateLimitLow: 500}
	with := without
	with.ScaleSetPools = []string{"gpu"}
	for _, n := range without.alarmNames() {
		if strings.Contains(n, "listener-polls") {
			t.Errorf("without scale sets: alarm %s", n)
		}
	}
	if got, want := with.alarmNames(), append(without.alarmNames(), "ci-listener-polls-gpu"); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("with gpu's scale set: alarms %q, want %q", got, want)
	}
}
