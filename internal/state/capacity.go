package state

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A pool's cap on live instances (maxInstances) is enforced with one
// capacity item per pool (pk capacity#<pool>) holding the reservations of
// launches in flight. A provision reserves before CreateFleet with an
// optimistic write on the item's version, after counting the pool's records
// that are not terminated; so two provisions can never both pass the cap,
// and instances launched but not yet visible in the index (or never
// recorded, when a provision died after CreateFleet) still count until
// their reservation ends.

const kindCapacity = "capacity"

// CapacityKey is the partition key of a pool's capacity item.
func CapacityKey(pool string) string { return "capacity#" + pool }

// Reservation is n instances being launched, counted until Until. Once
// launched, IDs names them: an instance the index already shows is counted
// there and not again here.
type Reservation struct {
	N     int      `dynamodbav:"n"`
	Until int64    `dynamodbav:"until"`
	IDs   []string `dynamodbav:"ids,omitempty"`
}

// pending is how many of reservation key's instances the index does not
// show yet. indexed maps each indexed instance to its assignment: the
// records of a launch carry the reservation's key as their assignment, so
// they are recognised even when the provision died before it settled.
func (r Reservation) pending(key string, indexed map[string]string) int {
	if len(r.IDs) > 0 {
		n := 0
		for _, id := range r.IDs {
			if _, ok := indexed[id]; !ok {
				n++
			}
		}
		return n
	}
	n := r.N
	for _, assignment := range indexed {
		if assignment == key {
			n--
		}
	}
	return max(n, 0)
}

type capacityItem struct {
	Key          string                 `dynamodbav:"pk"`
	Kind         string                 `dynamodbav:"kind"`
	Version      int64                  `dynamodbav:"version"`
	Reservations map[string]Reservation `dynamodbav:"reservations"`
	// Waiting are the provisions waiting for the pool's capacity, by run
	// id (capacity_queue.go).
	Waiting map[string]Waiter `dynamodbav:"waiting,omitempty"`
}

// CapacityError says a reservation would pass the pool's cap.
type CapacityError struct {
	Pool                  string
	Live, Reserved, Asked int
	Max                   int
}

func (e *CapacityError) Error() string {
	return fmt.Sprintf("pool %s has %d live instances and %d being launched of its maxInstances %d: cannot create %d more",
		e.Pool, e.Live, e.Reserved, e.Max, e.Asked)
}

// IsPoolAtCap reports whether err is a *CapacityError: the pool's own cap
// (maxInstances), not EC2's capacity (fleet.IsEC2CapacityShortage).
func IsPoolAtCap(err error) bool {
	var ce *CapacityError
	return errors.As(err, &ce)
}

// Reserve records that reservation id launches n instances of pool, counted
// for hold, if the pool's live records (count) plus the reservations in
// force plus n stay within max. It retries when another provision changed
// the item meanwhile.
func (s *Capacity) Reserve(ctx context.Context, pool, id string, n, max int, hold time.Duration, count func(context.Context) (map[string]string, error)) error {
	return s.retryVersioned(ctx, fmt.Sprintf("reserve %d instances of %s", n, pool), func() (versioned, error) {
		var item capacityItem
		found, err := s.getItem(ctx, CapacityKey(pool), &item)
		if err != nil {
			return versioned{}, err
		}
		indexed, err := count(ctx)
		if err != nil {
			return versioned{}, fmt.Errorf("count live instances of %s: %w", pool, err)
		}
		live := len(indexed)
		now := s.now()
		reserved := 0
		kept := map[string]Reservation{}
		for k, r := range item.Reservations {
			if r.Until > now && k != id {
				kept[k] = r
				reserved += r.pending(k, indexed)
			}
		}
		if live+reserved+n > max {
			return versioned{}, &CapacityError{Pool: pool, Live: live, Reserved: reserved, Asked: n, Max: max}
		}
		kept[id] = Reservation{N: n, Until: now + secs(hold)}
		next := capacityItem{Key: CapacityKey(pool), Kind: kindCapacity, Version: item.Version + 1, Reservations: kept, Waiting: item.inForce(now)}
		return versioned{next: next, found: found, version: item.Version}, nil
	})
}

// SettleReservation shortens reservation id of pool to the instances
// launched, for hold from now (none: drop it), once their records are
// written: they then count through the index, and the reservation only
// while the index lags.
func (s *Capacity) SettleReservation(ctx context.Context, pool, id string, launched []string, hold time.Duration) error {
	n := len(launched)
	b := newBuilder()
	path := b.name("reservations." + id)
	update := "SET " + b.name("version") + " = " + b.name("version") + " + " + b.value(1)
	if n > 0 {
		update += ", " + path + " = " + b.value(Reservation{N: n, Until: s.now() + secs(hold), IDs: launched})
	} else {
		update += " REMOVE " + path
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(CapacityKey(pool)),
		UpdateExpression: aws.String(update), ConditionExpression: aws.String("attribute_exists(" + path + ")"),
		ExpressionAttributeNames: b.attrNames(), ExpressionAttributeValues: b.attrValues()})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil // pruned by another reservation meanwhile: nothing to settle
	}
	if err != nil {
		return fmt.Errorf("settle reservation %s of %s: %w", id, pool, err)
	}
	return nil
}

// LiveIDs returns the ids (with their assignment) of the pool's records that are not terminated,
// expired leases included (their instances still run until refresh or a
// provision terminates them). It reads the index: a record written a moment
// ago may be missing, which the reservations cover.
func (s *Instances) LiveIDs(ctx context.Context, pool string) (map[string]string, error) {
	ids := map[string]string{}
	for _, st := range LiveStates {
		insts, err := s.ByPoolState(ctx, pool, st, time.Time{})
		if err != nil {
			return nil, err
		}
		for _, inst := range insts {
			ids[inst.ID] = inst.Assignment
		}
	}
	return ids, nil
}

// versioned is one write of retryVersioned: next (an item with a version
// attribute) over the item read at version (absent: found false).
type versioned struct {
	next    any
	found   bool
	version int64
}

// retryVersioned owns the read–change–conditional-put loop of the items
// written with an optimistic write on their version (the capacity item,
// its queue, the share items): step reads the item and makes its change
// (an error ends the loop as it is); the write is put with putVersioned,
// and when another writer changed the item meanwhile, step runs again
// after a pause that grows with the attempt (10 ms plus up to 40 ms per
// attempt, random, so that writers racing each other spread out). A
// failed write is wrapped with what; after 20 attempts the item "kept
// changing".
func (s *core) retryVersioned(ctx context.Context, what string, step func() (versioned, error)) error {
	for attempt := 0; ; attempt++ {
		w, err := step()
		if err != nil {
			return err
		}
		done, err := s.putVersioned(ctx, w.next, w.found, w.version, attempt)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(10+rand.IntN(40*(attempt+1))) * time.Millisecond):
		}
	}
}

// putVersioned writes next (an item with a version attribute) over the item
// read at version (absent: found false), conditionally on it being unchanged. done false with no
// error means another writer changed it: read again and retry
// (retryVersioned, which pauses first); after 20 attempts that is an error.
func (s *core) putVersioned(ctx context.Context, next any, found bool, version int64, attempt int) (done bool, err error) {
	av, err := attributevalue.MarshalMap(next)
	if err != nil {
		return false, err
	}
	b := newBuilder()
	var cond string
	if found {
		cond = b.name("version") + " = " + b.value(version)
	} else {
		cond = "attribute_not_exists(" + b.name(AttrPK) + ")"
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av, ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: b.attrNames(), ExpressionAttributeValues: b.attrValues()})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case !errors.As(err, &ccf):
		return false, err
	case attempt >= 20:
		return false, errors.New("the item kept changing")
	}
	return false, nil
}
