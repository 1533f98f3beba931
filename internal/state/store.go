package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const waiterLimit = 5 * time.Minute

// maxBatchAttempts bounds the BatchGetItem calls for one batch of keys:
// about 7 s of backoff in all.
const maxBatchAttempts = 8

// DynamoDBAPI holds only the DynamoDB calls the store makes.
type DynamoDBAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// core is what every aggregate's store shares: the client, the table and
// the clock. The aggregates hold one pointer to the same core, so a test
// that moves Store.Now moves every aggregate's clock.
type core struct {
	db    DynamoDBAPI
	table string
	// Now is the clock used for leases; tests move it.
	Now func() time.Time
	// PageSize limits the items of one Query page (0: DynamoDB's 1 MB pages).
	PageSize int32
	// usage counts the spans written to the usage ledger (usage.go).
	usage *usageCounts
}

// Store reads and writes one state table: one store per aggregate over
// the same table (see stores.go). Its methods are the aggregates', promoted;
// a caller that needs one aggregate takes that aggregate, or a narrow
// interface of its own.
type Store struct {
	*core
	Instances
	Runs
	Reruns
	Pools
	Capacity
	Leases
	Tokens
	RunnerReleases
	ScaleSets
	SpotBreakers
}

// New returns a store for the named table.
func New(db DynamoDBAPI, table string) *Store {
	c := &core{db: db, table: table, Now: time.Now, usage: &usageCounts{}}
	return &Store{core: c,
		Instances: Instances{c}, Runs: Runs{c}, Reruns: Reruns{c}, Pools: Pools{c}, Capacity: Capacity{c},
		Leases: Leases{c}, Tokens: Tokens{c}, RunnerReleases: RunnerReleases{c}, ScaleSets: ScaleSets{c}, SpotBreakers: SpotBreakers{c}}
}

// Table is the table's name.
func (s *core) Table() string { return s.table }

// ErrNotFound is returned (wrapped) when a record does not exist.
var ErrNotFound = errors.New("record not found")

// IsNotFound reports whether err says a record does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// Clause names the part of a transition's condition that did not hold.
type Clause string

const (
	ClauseExists     Clause = "exists"     // the record is missing (or, for a create, already there)
	ClauseState      Clause = "state"      // the record is in another state
	ClauseRunID      Clause = "runId"      // the record belongs to another run (or to one, or none)
	ClauseAssignment Clause = "assignment" // the record moved on to another assignment
	ClauseLease      Clause = "lease"      // the lease (threshold) has passed, or has not yet
	ClauseSignal     Clause = "signal"     // the awaited signal is missing for this assignment
	ClauseOwner      Clause = "owner"      // the instance belongs to another owner
	ClausePool       Clause = "pool"       // the instance belongs to another pool
	ClauseTemplate   Clause = "launchTemplateVersion"
	ClauseUses       Clause = "uses"      // reused too many times
	ClauseAge        Clause = "age"       // too old to be reused
	ClauseRebalance  Clause = "rebalance" // EC2 recommended rebalancing the spot instance
	ClauseChanged    Clause = "changed"   // the record changed between the write and its diagnosis
	ClauseStatus     Clause = "status"    // a run item is in another status
	ClausePayload    Clause = "payload"   // a run item exists with another request
)

// ConditionError is returned when a conditional write lost: Clause tells
// which part of the condition failed and Current holds the record as it was
// (nil when it does not exist).
type ConditionError struct {
	Key        string
	Transition string
	Clause     Clause
	Detail     string
	Current    *Instance
}

func (e *ConditionError) Error() string {
	return fmt.Sprintf("%s of %s refused (%s): %s", e.Transition, e.Key, e.Clause, e.Detail)
}

// Is lets errors.Is(err, ErrNotFound) hold for a missing record.
func (e *ConditionError) Is(target error) bool {
	return target == ErrNotFound && e.Clause == ClauseExists && e.Current == nil
}

// ClauseOf returns the failed clause of a ConditionError, or "" for other errors.
func ClauseOf(err error) Clause {
	var ce *ConditionError
	if errors.As(err, &ce) {
		return ce.Clause
	}
	return ""
}

// builder collects expression attribute names and values.
type builder struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newBuilder() *builder {
	return &builder{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

// name returns the placeholder path for a dotted attribute path.
func (b *builder) name(path string) string {
	parts := strings.Split(path, ".")
	for i, p := range parts {
		ph := "#" + sanitize(p)
		b.names[ph] = p
		parts[i] = ph
	}
	return strings.Join(parts, ".")
}

// value returns a placeholder for v.
func (b *builder) value(v any) string {
	ph := fmt.Sprintf(":v%d", len(b.values))
	av, err := attributevalue.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // only our own types reach here
	}
	b.values[ph] = av
	return ph
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, s)
}

func (b *builder) attrNames() map[string]string {
	if len(b.names) == 0 {
		return nil
	}
	return b.names
}

func (b *builder) attrValues() map[string]types.AttributeValue {
	if len(b.values) == 0 {
		return nil
	}
	return b.values
}

func (s *core) key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: &types.AttributeValueMemberS{Value: pk}}
}

// getItem reads one item with a consistent read; a missing item returns nil, nil.
func (s *core) getItem(ctx context.Context, pk string, out any) (bool, error) {
	res, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            s.key(pk),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("read %s: %w", pk, err)
	}
	if res.Item == nil {
		return false, nil
	}
	if err := attributevalue.UnmarshalMap(res.Item, out); err != nil {
		return false, fmt.Errorf("decode %s: %w", pk, err)
	}
	return true, nil
}

// Get reads an instance record with a consistent read.
func (s *Instances) Get(ctx context.Context, key Key) (*Instance, error) {
	var inst Instance
	ok, err := s.getItem(ctx, string(key), &inst)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("instance record %s: %w", key, ErrNotFound)
	}
	return &inst, nil
}

func (s *core) now() int64 { return s.Now().Unix() }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// GetMany reads instance records with consistent reads and returns those
// that exist by key. A repeated key is read once (BatchGetItem refuses
// duplicate keys).
func (s *Instances) GetMany(ctx context.Context, keys []Key) (map[Key]*Instance, error) {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = string(k)
	}
	found, err := s.batchGet(ctx, names, true)
	if err != nil {
		return nil, fmt.Errorf("batch read %d records: %w", len(keys), err)
	}
	var items []Instance
	if err := attributevalue.UnmarshalListOfMaps(found, &items); err != nil {
		return nil, fmt.Errorf("decode records: %w", err)
	}
	out := make(map[Key]*Instance, len(items))
	for i := range items {
		out[items[i].Key] = &items[i]
	}
	return out, nil
}

// batchGet reads items by key, 100 per BatchGetItem, asking again with a
// short backoff for keys left unprocessed (throttling). A hot item can stay
// unprocessed for many seconds: after maxBatchAttempts it says so rather
// than hold the caller, who must not act on a partial read.
func (s *core) batchGet(ctx context.Context, keys []string, consistent bool) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	for start := 0; start < len(keys); start += 100 {
		batch := keys[start:min(start+100, len(keys))]
		want := make([]map[string]types.AttributeValue, len(batch))
		for i, k := range batch {
			want[i] = s.key(k)
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: want, ConsistentRead: aws.Bool(consistent)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == maxBatchAttempts {
				return nil, fmt.Errorf("%d items still unprocessed (throttled) after %d attempts", len(req[s.table].Keys), attempt)
			}
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(attempt*attempt) * 50 * time.Millisecond):
				}
			}
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, err
			}
			out = append(out, res.Responses[s.table]...)
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// ByInstanceID reads the records of instances known only by id (from EC2,
// or a runner's name), by instance id. roleIDs names the instance roles an
// instance's record may be keyed with: its pool's, or every pool's when its
// pool is unknown. An instance has one record, under its pool's role.
func (s *Instances) ByInstanceID(ctx context.Context, ids []string, roleIDs func(instanceID string) []string) (map[string]*Instance, error) {
	out := make(map[string]*Instance, len(ids))
	var keys []Key
	for _, id := range ids {
		for _, role := range roleIDs(id) {
			if role != "" {
				keys = append(keys, InstanceKey(role, id))
			}
		}
	}
	found, err := s.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	for _, rec := range found {
		out[rec.ID] = rec
	}
	return out, nil
}

// FindInstance reads the record of an instance known by its id alone, its
// pool unknown (an operator's command line): under each pool's instance
// role. Other callers know the pool and read by key.
func (s *Store) FindInstance(ctx context.Context, instanceID string) (*Instance, error) {
	pools, err := s.ListPoolConfigs(ctx)
	if err != nil {
		return nil, err
	}
	found, err := s.ByInstanceID(ctx, []string{instanceID}, func(string) []string { return RoleIDs(pools) })
	if err != nil {
		return nil, err
	}
	if rec := found[instanceID]; rec != nil {
		return rec, nil
	}
	return nil, fmt.Errorf("instance %s: %w", instanceID, ErrNotFound)
}

// RolesByPool maps each pool's name to its instance role id.
func RolesByPool(pools []PoolConfig) map[string]string {
	out := make(map[string]string, len(pools))
	for _, p := range pools {
		out[p.Name] = p.InstanceRoleID
	}
	return out
}

// RoleIDs lists the pools' instance role ids.
func RoleIDs(pools []PoolConfig) []string {
	out := make([]string, 0, len(pools))
	for _, p := range pools {
		if p.InstanceRoleID != "" {
			out = append(out, p.InstanceRoleID)
		}
	}
	return out
}
