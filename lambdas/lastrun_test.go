package main

import (
	"fmt"
	"testing"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fielderr"
)

// A refused payload leaves no last run; a field-and-rule error of another
// source (the fleet refusing a launch request) is a failure like any other:
// one error type, told apart by its source.
func TestARefusedPayloadLeavesNoLastRunAFleetRefusalDoes(t *testing.T) {
	if r := lastRunOf(bundle.HandlerRefresh, nil, fmt.Errorf("refresh: %w", controlplane.Invalid("pool", "unknown")), 0.1); r != nil {
		t.Errorf("a refused payload left %+v", r)
	}
	err := fmt.Errorf("refresh: %w", fielderr.New(fielderr.Fleet, "Count", "must be at least 1, got 0"))
	if r := lastRunOf(bundle.HandlerRefresh, nil, err, 0.1); r == nil || r.Error != "refresh: fleet: Count: must be at least 1, got 0" {
		t.Errorf("a fleet refusal left %+v", r)
	}
}
