package controlplane

import (
	"context"
	"time"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/pool"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Repool waits until the agent confirms the idle instance is clean for its
// assignment, then sends the pool message and records it. When the agent
// fails or does not answer within wait, the instance is expired instead
// (never pooled) and refresh terminates it. It returns whether it pooled.
func (d *Deps) Repool(ctx context.Context, idle *state.Instance, p *state.PoolConfig, wait time.Duration) (bool, string) {
	log := d.Log.With("instanceId", idle.ID, "assignment", idle.Assignment)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	clean, err := d.Watcher().WaitSignal(wctx, idle.Key, idle.Assignment, state.SignalRemoveRegOK, state.SignalRemoveRegFailed)
	if err != nil {
		detail := "agent did not confirm it is clean: " + err.Error()
		d.expire(ctx, idle.Ref(), detail)
		log.Warn("instance not pooled", "reason", detail)
		return false, detail
	}
	if refused := pool.Admit(clean, p); refused != "" {
		d.expire(ctx, clean.Ref(), refused.ExpireReason())
		return false, string(refused)
	}
	msg := pool.Message{InstanceID: clean.ID, Pool: clean.Pool, InstanceType: clean.InstanceType, UsageClass: clean.UsageClass, IdleUntil: clean.Threshold}
	if err := d.Queue(p).Send(ctx, msg); err != nil {
		// The record is clean and idle without pooledAt: refresh re-sends.
		log.Warn("pool message not sent; refresh will send it", "err", err)
		return true, err.Error()
	}
	if _, err := d.Store.MarkPooled(ctx, clean.Ref()); err != nil {
		log.Warn("pooledAt not recorded", "err", err)
	}
	return true, ""
}
