package state

import (
	"reflect"
	"strings"
	"testing"
)

func TestAScaleSetStatusReadsBackAsTheListenerWroteIt(t *testing.T) {
	s, _ := newStore(t)
	if got, err := s.GetScaleSetStatus(ctx, testPool); err != nil || got != nil {
		t.Fatalf("before any write: %+v, %v; want nil, nil", got, err)
	}
	want := ScaleSetStatus{Pool: testPool, ScaleSet: "linux-large", ScaleSetID: 7, Holder: "task-1", SessionAt: 1_799_999_000,
		PolledAt: 1_799_999_990, Statistics: ScaleSetStatistics{Available: 1, Assigned: 3, Running: 2, Registered: 3, Busy: 2, Idle: 1},
		LiveRuns: 3, Error: "session lost", ErrorAt: 1_799_999_500}
	if err := s.PutScaleSetStatus(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetScaleSetStatus(ctx, testPool)
	if err != nil {
		t.Fatal(err)
	}
	want.WrittenAt = s.now() // the store's clock, when the writer gave none
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("read back %+v\nwant %+v", *got, want)
	}
	// A later write replaces it whole: the error cleared, the holder gone.
	next := ScaleSetStatus{Pool: testPool, ScaleSet: "linux-large", ScaleSetID: 7, SessionAt: 1_800_000_000, WrittenAt: 1_800_000_000}
	if err := s.PutScaleSetStatus(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetScaleSetStatus(ctx, testPool); !reflect.DeepEqual(*got, next) {
		t.Errorf("after the second write %+v, want %+v", *got, next)
	}
}

func TestAScaleSetStatusKeepsABoundedValidError(t *testing.T) {
	s, _ := newStore(t)
	long := strings.Repeat("x", maxStatusError-1) + "é and more"
	if err := s.PutScaleSetStatus(ctx, ScaleSetStatus{Pool: testPool, Error: long}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetScaleSetStatus(ctx, testPool)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Error) != maxStatusError-1 || !strings.HasPrefix(long, got.Error) {
		t.Errorf("error kept %d bytes (%q…); want the %d before the cut rune", len(got.Error), got.Error[len(got.Error)-3:], maxStatusError-1)
	}
}
