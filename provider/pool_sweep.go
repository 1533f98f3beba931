package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
)

// Destroying a pool: what its Delete does once no launch can start (the
// config and the template are gone), and the seam tests use to act between
// its steps.

// sweepSettle and sweepEvery: sweepPool lists the pool's live instances
// every sweepEvery and stops once sweepSettle has passed since it last found
// one. A launch that CreateFleet accepted just before the template went is
// visible to DescribeInstances only after a few seconds (its index is
// eventually consistent), so one empty listing proves nothing.
var (
	sweepSettle = 15 * time.Second
	sweepEvery  = 3 * time.Second
)

// poolDeleteStage is called by Delete after each step with the step's name;
// tests set it to act as a provision still running would (a no-op in the
// product).
var poolDeleteStage = func(string) {}

// sweepPool terminates the pool's live instances until none has appeared
// for sweepSettle.
func (r *poolResource) sweepPool(ctx context.Context, pool string) error {
	f := fleet.New(r.c.aws.EC2(), r.c.environment)
	quiet := time.Now()
	for {
		live, err := f.List(ctx, fleet.Filter{Pool: pool})
		if err != nil {
			return fmt.Errorf("listing the pool's instances: %w", err)
		}
		if len(live) > 0 {
			ids := make([]string, len(live))
			for i, in := range live {
				ids[i] = in.ID
			}
			tflog.Info(ctx, "terminating the pool's instances", map[string]any{"pool": pool, "instances": ids})
			if _, err := f.Terminate(ctx, ids); err != nil {
				return err
			}
			quiet = time.Now()
		}
		if time.Since(quiet) >= sweepSettle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(sweepEvery):
		}
	}
}
