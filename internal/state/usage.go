package state

import (
	"context"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// The usage ledger (issue 41, item 2): what the cost report counts.
//
// Every transition of an instance record (apply) closes the span the
// record spent in its previous state. The same UpdateItem copies what the
// span needs out of the record as it was (prevState = spanState,
// prevStateAt = stateAt, prevRunId = runId: DynamoDB reads the right-hand
// side of SET before the update) and stamps spanState and stateAt anew,
// so the span's start and end are both the control plane's clock and
// nothing an instance writes goes into it: spanState, stateAt and the
// prev* attributes are outside AgentAttributes (state and version are
// not: an instance can rewrite those on its own record, so neither is
// read here), and the ledger's items are keyed usage#…, which the
// instance role's dynamodb:LeadingKeys (its own role id) can neither read
// nor write.
//
// The closed span is then appended to a ledger item: one per 15-minute slot
// of the span's end and shard of its instance id (8), a map of spans keyed
// by instance id, state and the span's start and end, so a retried write sets the same
// entry again (append-only and idempotent). Sharding keeps each item small:
// an UpdateItem is billed by the larger of the item's old and new size, so
// a slot's writes stay a few KB each. Items live 35 days (expiresAt).
//
// Which writes close a span: every write that moves a record's state goes
// through apply (Create's PutItem opens the first span; no other path
// writes an instance record: no TransactWriteItems or DeleteItem names
// one, and a record's TTL starts only once it is terminated). Writes that
// move no state (heartbeat, renew, pooled, expire, signals) close none:
// an expired lease is not a state, its time counts on in the state the
// record is in until the termination that follows closes it.
//
// The span write follows the transition; it is not in one transaction
// with it (concurrent transactions on one ledger item would cancel each
// other and fail transitions). A span that cannot be written after three
// tries is dropped and counted (UsageCounts): the report then undercounts,
// never overcounts. The same undercount follows a transition DynamoDB
// stored but answered with an error, when another transition of the record
// came before the SDK's retry: apply then recognises its write (applied)
// but the record's prev* attributes name the later span, not its own.

const (
	kindUsage       = "usage"
	usageSlot       = 15 * time.Minute
	usageShards     = 8
	usageKeepFor    = 35 * 24 * time.Hour
	usageWriteTries = 3
	attrUsageSpans  = "spans"
	attrStateAt     = "stateAt"
	attrSpanState   = "spanState"
	attrPrevState   = "prevState"
	attrPrevStateAt = "prevStateAt"
	attrPrevRunID   = "prevRunId"
	usageKeyPrefix  = "usage#"
	usageSlotLayout = "20060102T1504"
	usageRetryPause = 100 * time.Millisecond
)

// UsageKeep is how long the ledger keeps a span.
const UsageKeep = usageKeepFor

// Span is time an instance spent in one state, by the control plane's
// clock: [From, To) in unix seconds.
type Span struct {
	InstanceID   string `dynamodbav:"i" json:"instanceId"`
	Pool         string `dynamodbav:"p" json:"pool"`
	Owner        string `dynamodbav:"o,omitempty" json:"owner,omitempty"`
	RunID        string `dynamodbav:"r,omitempty" json:"runId,omitempty"`
	State        State  `dynamodbav:"s" json:"state"`
	Next         State  `dynamodbav:"n" json:"next"` // the state it went to ("" for a span still open)
	From         int64  `dynamodbav:"f" json:"from"`
	To           int64  `dynamodbav:"t" json:"to"`
	InstanceType string `dynamodbav:"ty" json:"instanceType"`
	UsageClass   string `dynamodbav:"u" json:"usageClass"`
	// Open marks a span read from a live record, counted up to the
	// report's end: the instance is still in that state.
	Open bool `dynamodbav:"-" json:"open,omitempty"`
}

// Seconds is the span's length.
func (s Span) Seconds() int64 { return max(0, s.To-s.From) }

// closedSpan is the span the transition that produced inst closed, if the
// record says when the state began (records written before stateAt existed
// do not: their first span is not counted).
func closedSpan(inst *Instance) (Span, bool) {
	if inst.PrevStateAt <= 0 || inst.PrevState == "" || inst.StateAt < inst.PrevStateAt {
		return Span{}, false
	}
	return Span{InstanceID: inst.ID, Pool: inst.Pool, Owner: inst.Owner, RunID: inst.PrevRunID,
		State: inst.PrevState, Next: inst.SpanState, From: inst.PrevStateAt, To: inst.StateAt,
		InstanceType: inst.InstanceType, UsageClass: inst.UsageClass}, true
}

// OpenSpan is the span a live record is in now, up to now (false for a
// terminated record or one without stateAt).
func (i *Instance) OpenSpan(now int64) (Span, bool) {
	if i.SpanState == "" || i.SpanState == Terminated || i.StateAt <= 0 {
		return Span{}, false
	}
	return Span{InstanceID: i.ID, Pool: i.Pool, Owner: i.Owner, RunID: i.RunID, State: i.SpanState,
		From: i.StateAt, To: max(now, i.StateAt), InstanceType: i.InstanceType, UsageClass: i.UsageClass,
		Open: true}, true
}

// usageKey is the ledger item of a span ending at end, for its instance.
func usageKey(end int64, shard int) string {
	slot := time.Unix(end, 0).UTC().Truncate(usageSlot)
	return usageKeyPrefix + slot.Format(usageSlotLayout) + "#" + strconv.Itoa(shard)
}

func usageShard(instanceID string) int {
	h := fnv.New32a()
	h.Write([]byte(instanceID))
	return int(h.Sum32() % usageShards)
}

// recordSpan appends the span a transition closed to the ledger. It never
// fails the transition, which has happened: a span it cannot write is
// counted as lost.
func (s *Instances) recordSpan(ctx context.Context, inst *Instance) {
	sp, ok := closedSpan(inst)
	if !ok {
		return
	}
	key := s.key(usageKey(sp.To, usageShard(sp.InstanceID)))
	entry := fmt.Sprintf("%s@%s@%d-%d", sp.InstanceID, sp.State, sp.From, sp.To)
	// The entry goes into the item's map; the first span of a slot's
	// shard finds no map (a map entry cannot be set where its map is
	// missing), so it makes the map and writes the entry again.
	eb := newBuilder()
	entryIn := &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: key,
		UpdateExpression: aws.String("SET " + eb.name("kind") + " = " + eb.value(kindUsage) +
			", " + eb.name(AttrExpiresAt) + " = " + eb.value(time.Unix(sp.To, 0).Add(usageSlot+usageKeepFor).Unix()) +
			", " + eb.name(attrUsageSpans) + "." + eb.placeholder(entry) + " = " + eb.value(sp)),
		ExpressionAttributeNames: eb.attrNames(), ExpressionAttributeValues: eb.attrValues()}
	mb := newBuilder()
	mapIn := &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: key,
		UpdateExpression:         aws.String("SET " + mb.name(attrUsageSpans) + " = if_not_exists(" + mb.name(attrUsageSpans) + ", " + mb.value(map[string]any{}) + ")"),
		ExpressionAttributeNames: mb.attrNames(), ExpressionAttributeValues: mb.attrValues()}
	var err error
	for try := range usageWriteTries {
		if try > 0 {
			time.Sleep(time.Duration(try) * usageRetryPause)
		}
		if _, err = s.db.UpdateItem(ctx, entryIn); err == nil {
			s.usage.add(nil)
			return
		}
		if _, err = s.db.UpdateItem(ctx, mapIn); err != nil {
			continue
		}
		if _, err = s.db.UpdateItem(ctx, entryIn); err == nil {
			s.usage.add(nil)
			return
		}
	}
	s.usage.add(fmt.Errorf("usage span %s: %w", entry, err))
}

// usageCounts counts the spans a store recorded and lost.
type usageCounts struct {
	mu             sync.Mutex
	recorded, lost int64
	lastErr        error
}

func (u *usageCounts) add(err error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		u.recorded++
		return
	}
	u.lost++
	u.lastErr = err
}

// placeholder names one literal map key (not split at dots).
func (b *builder) placeholder(name string) string {
	ph := "#k" + strconv.Itoa(len(b.names))
	b.names[ph] = name
	return ph
}

// UsageCounts are the spans this store recorded and lost since it was made
// (a handler's metrics), and why the last one was lost.
func (s *core) UsageCounts() (recorded, lost int64, lastErr error) {
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	return s.usage.recorded, s.usage.lost, s.usage.lastErr
}

type usageItem struct {
	Spans map[string]Span `dynamodbav:"spans"`
}

// Usage reads the spans the ledger holds that end within [from, to), every
// shard of every slot.
func (s *core) Usage(ctx context.Context, from, to time.Time) ([]Span, error) {
	if !to.After(from) {
		return nil, fmt.Errorf("usage: the window's end %s is not after its start %s", to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
	}
	var keys []string
	for slot := from.UTC().Truncate(usageSlot); slot.Before(to); slot = slot.Add(usageSlot) {
		for shard := range usageShards {
			keys = append(keys, usageKey(slot.Unix(), shard))
		}
	}
	items, err := s.batchGet(ctx, keys, false) // eventually consistent: the ledger is for people, nothing decides on it
	if err != nil {
		return nil, fmt.Errorf("read usage ledger: %w", err)
	}
	var out []Span
	for _, it := range items {
		var u usageItem
		if err := attributevalue.UnmarshalMap(it, &u); err != nil {
			return nil, fmt.Errorf("decode usage ledger: %w", err)
		}
		for _, sp := range u.Spans {
			if sp.To >= from.Unix() && sp.To < to.Unix() {
				out = append(out, sp)
			}
		}
	}
	return out, nil
}
