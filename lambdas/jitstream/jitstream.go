// Package jitstream is the stream consumer of the state table: it answers
// an agent's request for its next just-in-time configuration (UD_JIT_NEXT)
// within about a second, while the instance reaches nothing but its own
// record. DynamoDB Streams delivers every change of a record; this handler
// looks only at instance records whose new image carries the request,
// re-reads the record and its run (an image can be stale, a batch can be
// redelivered), and mints the configuration only when controlplane.MintWhy
// allows it; PutJIT's condition makes a redelivery harmless.
//
// A record it could not serve because the table failed (throttled, say) is
// reported as a batch item failure, so Lambda retries from it. One GitHub
// failed for (an outage, a rate limit: one owner's trouble) is skipped, so
// that it holds up no other owner's requests behind it on the shard: the
// agent repeats an unanswered request every few seconds, and the repeat is
// served once GitHub answers. A request that may not be served (a released
// run, an expired lease) is skipped: the agent never gets its runner, and
// release or refresh end the instance as for any other.
//
// A request that may be served still costs GitHub calls against the
// owner's installation budget, and the instance can write as many as it
// likes: controlplane.DecideJIT bounds them per assignment and per
// instance (controlplane/jitcap.go). A request over the bound is refused:
// recorded in the record, removed from it, and returned in Output.Refused
// for the function's metric.
package jitstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// Deps are what the consumer runs with.
type Deps struct {
	*controlplane.Deps
	// Now is the clock leases and the instance's rate are judged by; nil:
	// time.Now.
	Now func() time.Time
	// Limits bound what one instance's requests cost; zero:
	// controlplane.DefaultJITLimits.
	Limits controlplane.JITLimits
}

// Output is the partial batch response Lambda reads, and the requests
// refused, which only the function's metrics read.
type Output struct {
	events.DynamoDBEventResponse
	Refused []Refusal `json:"-"`
}

// Refusal is a request refused by what it would cost.
type Refusal struct {
	Pool       string
	InstanceID string
	Seq        int
	Clause     state.Clause
	Why        string
}

// Handle serves one batch of stream records. It answers with the records
// to retry (partial batch response); an error means the whole batch.
func Handle(ctx context.Context, deps Deps, payload json.RawMessage) (*Output, error) {
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("not a DynamoDB stream event: %w", err)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Limits == (controlplane.JITLimits{}) {
		deps.Limits = controlplane.DefaultJITLimits
	}
	out := &Output{DynamoDBEventResponse: events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}}
	// The requests of different instances are served at once, each
	// instance's own in their order: each costs a few reads and writes and
	// a GitHub call, and served one after the other the last request of a
	// batch of ten (ten instances whose jobs ended together) waited for
	// the nine before it, a wait of ours on every next-job gap. Lambda
	// itself hands a shard's batches to one invocation at a time.
	failed := make([]bool, len(ev.Records)) // a table failure: retried
	refused := make([]*Refusal, len(ev.Records))
	byKey := map[state.Key][]int{}
	var keys []state.Key
	for i, r := range ev.Records {
		key, ok := asksForJIT(r)
		if !ok {
			deps.Log.Debug("stream record without a request", "event", r.EventName, "keys", len(r.Change.Keys))
			continue
		}
		if byKey[key] == nil {
			keys = append(keys, key)
		}
		byKey[key] = append(byKey[key], i)
	}
	var wg sync.WaitGroup
	for _, key := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range byKey[key] {
				var err error
				refused[i], err = serve(ctx, deps, key)
				if err == nil {
					continue
				}
				if awserr.Code(err) == "" {
					// GitHub's trouble (an outage, a rate limit, an App
					// without a permission) is one owner's: a batch failure
					// would hold the shard, every pool's and owner's
					// requests behind it, for up to the stream's retries.
					// The agent asks again every few seconds, and each ask
					// is a new stream record.
					deps.Log.Warn("just-in-time request not served: the agent's next request is", "record", key, "err", err)
					continue
				}
				deps.Log.Warn("just-in-time request not served: retried", "record", key, "err", err)
				failed[i] = true
				return // this instance's later records come again with it
			}
		}()
	}
	wg.Wait()
	for _, r := range refused {
		if r != nil {
			out.Refused = append(out.Refused, *r)
		}
	}
	for i, r := range ev.Records {
		if failed[i] {
			// Lambda retries from the first failure on; the records after
			// it come again too, those already served included: their
			// requests left the record, so serving them again does nothing.
			out.BatchItemFailures = append(out.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: r.Change.SequenceNumber})
			break
		}
	}
	return out, nil
}

// asksForJIT is the key of an instance record whose new image carries an
// UD_JIT_NEXT for its current assignment.
func asksForJIT(r events.DynamoDBEventRecord) (state.Key, bool) {
	if r.EventName == "REMOVE" {
		return "", false
	}
	img := r.Change.NewImage
	kind, ok := img["kind"]
	if !ok || kind.DataType() != events.DataTypeString || kind.String() != "instance" {
		return "", false
	}
	key, ok := img[state.AttrPK]
	if !ok || key.DataType() != events.DataTypeString {
		return "", false
	}
	sigs, ok := img["signals"]
	if !ok || sigs.DataType() != events.DataTypeMap {
		return "", false
	}
	next, ok := sigs.Map()[state.SignalJITNext]
	if !ok || next.DataType() != events.DataTypeMap {
		return "", false
	}
	a, ok := next.Map()["assignment"]
	cur, ok2 := img["assignment"]
	if !ok || !ok2 || a.DataType() != events.DataTypeString || cur.DataType() != events.DataTypeString || a.String() != cur.String() {
		return "", false
	}
	return state.Key(key.String()), true
}

// serve re-reads the record and its run and mints what is asked for, if
// it may and what it costs is within the bound; it returns the refusal
// when it is not. A nil error means done, or nothing to do.
func serve(ctx context.Context, d Deps, key state.Key) (*Refusal, error) {
	rec, err := storeOf(d.Deps).Get(ctx, key)
	if state.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var run *state.Run
	if rec.RunID != "" {
		if run, err = storeOf(d.Deps).GetRun(ctx, rec.RunID); err != nil && !state.IsNotFound(err) {
			return nil, err
		}
	}
	var p *state.PoolConfig
	if run != nil && run.ID == rec.RunID {
		if p, err = d.Pool(ctx, run.Pool); err != nil && !state.IsNotFound(err) {
			return nil, err
		}
	}
	now := d.Now()
	if why := controlplane.MintWhy(rec, run, p, now); why != "" {
		d.Log.Info("just-in-time request skipped", "instanceId", rec.ID, "assignment", rec.Assignment, "why", why)
		return nil, nil
	}
	// Who the runner is for comes from the run's pool, never the record.
	rec.Pool, rec.Owner = p.Name, p.Owner
	n := rec.JITWanted()
	v := controlplane.DecideJIT(rec, false, now, d.Limits)
	if v.Refused() {
		return refuse(ctx, d, rec, n, v, now, false)
	}
	// Taken before GitHub is asked anything: the rate holds against a
	// parallel or repeated invocation too, and the request leaves the
	// record (the agent asks again if this one comes to nothing).
	every := time.Duration(0) // within the cap: jitSeq lets each number through once
	if v.Look {
		every = d.Limits.Every
	}
	if _, err := storeOf(d.Deps).TakeJITRequest(ctx, rec.Key, rec.Assignment, n, now.Unix(), every); err != nil {
		var ce *state.ConditionError
		switch {
		case errors.As(err, &ce) && ce.Clause == state.ClauseJITRate:
			return refuse(ctx, d, rec, n, controlplane.JITVerdict{Clause: ce.Clause, Why: ce.Detail}, now, false)
		case ce != nil:
			d.Log.Info("just-in-time request overtaken", "instanceId", rec.ID, "err", err)
			return nil, nil
		}
		return nil, err
	}
	if v.Look {
		served, err := d.LookJIT(ctx, rec, now, d.Limits)
		if err != nil {
			return nil, fmt.Errorf("look whether the runners of %s took a job: %w", rec.ID, err)
		}
		rec.JITServed = served
		if v = controlplane.DecideJIT(rec, true, now, d.Limits); v.Refused() {
			return refuse(ctx, d, rec, n, v, now, true)
		}
	}
	group, err := d.GroupID(ctx, p)
	if err != nil {
		return nil, err
	}
	label := run.Label
	if label == "" {
		label = run.ID // a run item older than minted labels
	}
	_, err = d.MintJIT(ctx, rec, n, label, group)
	if state.ClauseOf(err) != "" {
		// The record moved on meanwhile (released, answered by a
		// redelivery): nothing left to do, and the runner is deleted.
		d.Log.Info("just-in-time request overtaken", "instanceId", rec.ID, "err", err)
		return nil, nil
	}
	if err != nil {
		d.Groups.Forget(p.Owner, p.RunnerGroup) // found again next time: it may be what failed
	}
	return nil, err
}

// refuse records that request n of rec was refused (v) and removes it;
// looked says a look at GitHub found no runner took a job, and counts it.
func refuse(ctx context.Context, d Deps, rec *state.Instance, n int, v controlplane.JITVerdict, now time.Time, looked bool) (*Refusal, error) {
	prior := rec.JITRefusedNow()
	r := state.JITRefusal{Seq: n, At: now.Unix(), Clause: v.Clause, Why: v.Why, Count: prior.Count + 1}
	if prior.Seq == n {
		r.Looks, r.LookedAt = prior.Looks, prior.LookedAt
	}
	served := 0
	if looked {
		r.Looks, r.LookedAt, served = r.Looks+1, now.Unix(), rec.JITServed
	}
	d.Log.Warn("just-in-time request refused", "instanceId", rec.ID, "assignment", rec.Assignment, "seq", n, "clause", v.Clause, "why", v.Why, "refusedInAssignment", r.Count)
	if _, err := storeOf(d.Deps).RefuseJIT(ctx, rec.Key, rec.Assignment, r, served); err != nil && state.ClauseOf(err) == "" {
		return nil, err
	}
	return &Refusal{Pool: rec.Pool, InstanceID: rec.ID, Seq: n, Clause: v.Clause, Why: v.Why}, nil
}
