package refresh_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
)

func (h *hookedDB) UpdateItem(c context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := h.hook("UpdateItem", in); err != nil {
		return nil, err
	}
	return h.DynamoDBAPI.UpdateItem(c, in, o...)
}

// Issue 36: root on an instance whose record refresh judges forged (a year
// of lease), or whose lease has passed, rewrites its record's assignment —
// an attribute its role may write, since the agent's own conditions name
// it — between refresh's read and refresh's conditional termination, as it
// can before every write refresh makes. Terminating on the assignment read
// lost that race every time and the instance lived on. The termination is
// conditional on what only the control plane writes (poolState,
// leaseLimit, uses as read), so the rewrite changes nothing: the instance
// ends. (With refresh retiring on the assignment read, as before — tried
// once — it reports "the instance i-… lives on: it rewrote its assignment
// while refresh retired it".) A record the control plane itself changed
// since the read (a release) is still left alone (next test).
func TestAnInstanceRewritingItsAssignmentDuringRefreshIsRetiredAnyway(t *testing.T) {
	year := unixAttr(time.Now().Add(3 * 365 * 24 * time.Hour))
	for _, c := range []struct {
		name string
		make func(w *world, inst *state.Instance)
		kind refresh.Kind
	}{
		{"its record forged", func(w *world, inst *state.Instance) {
			w.forgeAsInstance(inst.Key, map[string]types.AttributeValue{state.AttrThreshold: year, "leaseCap": year})
		}, refresh.KindForged},
		{"its lease passed", func(w *world, inst *state.Instance) { w.now = w.now.Add(11 * time.Minute) }, refresh.KindExpired},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			inst, _ := w.running("run-1", 0)
			c.make(w, inst)
			rewrites := 0
			w.db.set(func(op string, in any) error {
				up, ok := in.(*dynamodb.UpdateItemInput)
				if op != "UpdateItem" || !ok {
					return nil
				}
				if k, _ := up.Key[state.AttrPK].(*types.AttributeValueMemberS); k == nil || k.Value != string(inst.Key) {
					return nil
				}
				// Refresh read the record and is about to write it: the
				// instance gets in first, with its own role's write.
				w.db.set(nil)
				w.forgeAsInstance(inst.Key, map[string]types.AttributeValue{"assignment": &types.AttributeValueMemberS{Value: state.NewAssignment()}})
				rewrites++
				return nil
			})
			out, err := w.refresh()
			w.db.set(nil)
			must(t, err)
			if rewrites != 1 {
				t.Fatalf("the instance rewrote its assignment %d times, want once, before refresh's write", rewrites)
			}
			if w.alive(inst.ID) {
				t.Fatalf("the instance %s lives on: it rewrote its assignment while refresh retired it (terminated: %+v)", inst.ID, out.Terminated)
			}
			rec, err := w.cp.Get(ctx, inst.Key)
			must(t, err)
			if rec.State != state.Terminated {
				t.Fatalf("its record is %s, want terminated", rec.State)
			}
			if len(out.Terminated) != 1 || out.Terminated[0].Kind != c.kind {
				t.Errorf("decisions %+v, want the instance as %s", out.Terminated, c.kind)
			}
		})
	}
}

// The other side of the same condition: what the control plane changed
// since it read a record is a newer verdict than the one it read, and a
// forged record released meanwhile (a new assignment, poolState idle, a
// new lease limit) is not terminated on the old one.
func TestAForgedRecordTheControlPlaneChangedSinceItWasReadIsNotTerminatedOnTheOldVerdict(t *testing.T) {
	w := newWorld(t)
	read, _ := w.running("run-forger", 0)
	year := unixAttr(w.now.Add(365 * 24 * time.Hour))
	w.forgeAsInstance(read.Key, map[string]types.AttributeValue{state.AttrThreshold: year})
	read, err := w.cp.Get(ctx, read.Key)
	must(t, err)
	if _, err := w.cp.Release(ctx, read.Ref(), "run-forger", 5*time.Minute, nil); err != nil {
		t.Fatalf("release: %v", err)
	}
	_, err = w.cp.Terminate(ctx, read.Key, state.Termination{Given: read, Reason: "forged record"})
	if state.ClauseOf(err) != state.ClauseChanged {
		t.Fatalf("terminating on the verdict read before a release: %v, want the %s clause", err, state.ClauseChanged)
	}
}
