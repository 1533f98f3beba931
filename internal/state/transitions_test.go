package state

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestTransitionsRefused breaks one clause of each transition at a time and
// checks the typed error names it and the record is unchanged.
func TestTransitionsRefused(t *testing.T) {
	s, clk := newStore(t)
	n := 0
	id := func() string { n++; return fmt.Sprintf("i-r%04d", n) }

	cases := []struct {
		name  string
		want  Clause
		apply func(t *testing.T) (string, error) // returns the instance id it acted on
	}{
		{"running: record missing", ClauseExists, func(t *testing.T) (string, error) {
			_, err := s.MarkRunning(ctx, Ref{Key: InstanceKey(testRole, "i-missing"), ID: "i-missing", Pool: testPool, Assignment: "a"}, time.Hour, time.Hour)
			return "", err
		}},
		{"running: wrong state (idle)", ClauseState, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			must(t, s.PutSignal(ctx, p.Key, p.Assignment, SignalRegOK, ""))
			_, err := s.MarkRunning(ctx, p.Ref(), time.Hour, time.Hour)
			return p.ID, err
		}},
		{"running: other assignment", ClauseAssignment, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			ref := c.Ref()
			ref.Assignment = "someone-else"
			_, err := s.MarkRunning(ctx, ref, time.Hour, time.Hour)
			return c.ID, err
		}},
		{"running: other pool", ClausePool, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			ref := c.Ref()
			ref.Pool = "windows"
			_, err := s.MarkRunning(ctx, ref, time.Hour, time.Hour)
			return c.ID, err
		}},
		{"running: lease expired", ClauseLease, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			must(t, s.PutSignal(ctx, c.Key, c.Assignment, SignalRegOK, ""))
			clk.Add(11 * time.Minute)
			defer clk.Add(-11 * time.Minute)
			_, err := s.MarkRunning(ctx, c.Ref(), time.Hour, time.Hour)
			return c.ID, err
		}},
		{"running: no UD_REG_OK", ClauseSignal, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			must(t, s.PutSignal(ctx, c.Key, c.Assignment, SignalOK, ""))
			_, err := s.MarkRunning(ctx, c.Ref(), time.Hour, time.Hour)
			return c.ID, err
		}},
		{"release: other run", ClauseRunID, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			_, err := s.Release(ctx, r.Ref(), "r2", time.Minute, nil)
			return r.ID, err
		}},
		{"release: not running yet", ClauseState, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			_, err := s.Release(ctx, c.Ref(), "r1", time.Minute, nil)
			return c.ID, err
		}},
		{"release: lease expired", ClauseLease, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			clk.Add(61 * time.Minute)
			defer clk.Add(-61 * time.Minute)
			_, err := s.Release(ctx, r.Ref(), "r1", time.Minute, nil)
			return r.ID, err
		}},
		{"release: other assignment", ClauseAssignment, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			ref := r.Ref()
			ref.Assignment = "old"
			_, err := s.Release(ctx, ref, "r1", time.Minute, nil)
			return r.ID, err
		}},
		{"unclaim: not claimed", ClauseState, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			_, err := s.Unclaim(ctx, r.Ref(), time.Minute, nil)
			return r.ID, err
		}},
		{"claim: missing", ClauseExists, func(t *testing.T) (string, error) {
			_, err := s.Claim(ctx, "i-nothing", claimReq("r9"))
			return "", err
		}},
		{"claim: running", ClauseState, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			_, err := s.Claim(ctx, r.Key, claimReq("r9"))
			return r.ID, err
		}},
		{"claim: already claimed", ClauseState, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			_, err := s.Claim(ctx, p.Key, claimReq("r8"))
			must(t, err)
			_, err = s.Claim(ctx, p.Key, claimReq("r9"))
			return "", err // the record did change, by the first claim
		}},
		{"claim: not clean", ClauseSignal, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			idle, err := s.Release(ctx, r.Ref(), "r1", time.Minute, nil)
			must(t, err)
			_, err = s.Claim(ctx, idle.Key, claimReq("r9"))
			return r.ID, err
		}},
		{"claim: clean for an older assignment only", ClauseSignal, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			c, err := s.Claim(ctx, p.Key, claimReq("r8"))
			must(t, err)
			// registration failed: back to idle, but the agent has not confirmed this assignment yet
			idle, err := s.Unclaim(ctx, c.Ref(), time.Minute, nil)
			must(t, err)
			_, err = s.Claim(ctx, idle.Key, claimReq("r9"))
			return idle.ID, err
		}},
		{"claim: idle lease expired", ClauseLease, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			clk.Add(16 * time.Minute)
			defer clk.Add(-16 * time.Minute)
			_, err := s.Claim(ctx, p.Key, claimReq("r9"))
			return p.ID, err
		}},
		{"claim: other owner", ClauseOwner, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			req := claimReq("r9")
			req.Owner = "acme/other"
			_, err := s.Claim(ctx, p.Key, req)
			return p.ID, err
		}},
		{"claim: other pool", ClausePool, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			req := claimReq("r9")
			req.Pool = "windows"
			_, err := s.Claim(ctx, p.Key, req)
			return p.ID, err
		}},
		{"claim: outdated launch template", ClauseTemplate, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			req := claimReq("r9")
			req.LaunchTemplateVersion = "4"
			_, err := s.Claim(ctx, p.Key, req)
			return p.ID, err
		}},
		{"claim: used up", ClauseUses, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			req := claimReq("r9")
			req.MaxUses = 1
			_, err := s.Claim(ctx, p.Key, req)
			return p.ID, err
		}},
		{"claim: too old", ClauseAge, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			req := claimReq("r9")
			req.MaxAge = time.Second
			clk.Add(2 * time.Second)
			defer clk.Add(-2 * time.Second)
			_, err := s.Claim(ctx, p.Key, req)
			return p.ID, err
		}},
		{"join pool: has a run", ClauseRunID, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			must(t, s.PutSignal(ctx, c.Key, c.Assignment, SignalOK, ""))
			_, err := s.JoinPool(ctx, c.Ref(), time.Minute)
			return c.ID, err
		}},
		{"join pool: no UD_OK", ClauseSignal, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "")
			_, err := s.JoinPool(ctx, c.Ref(), time.Minute)
			return c.ID, err
		}},
		{"renew: lease expired", ClauseLease, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			clk.Add(16 * time.Minute)
			defer clk.Add(-16 * time.Minute)
			_, err := s.Renew(ctx, p.Ref(), time.Minute)
			return p.ID, err
		}},
		{"renew: claimed meanwhile", ClauseAssignment, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			_, err := s.Claim(ctx, p.Key, claimReq("r9"))
			must(t, err)
			_, err = s.Renew(ctx, p.Ref(), time.Minute)
			return "", err
		}},
		{"pooled: moved on", ClauseAssignment, func(t *testing.T) (string, error) {
			p := pooled(t, s, id())
			_, err := s.Claim(ctx, p.Key, claimReq("r9"))
			must(t, err)
			_, err = s.MarkPooled(ctx, p.Ref())
			return "", err
		}},
		{"expire: already terminated", ClauseState, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			term, err := s.Terminate(ctx, c.Key, Termination{Assignment: c.Assignment})
			must(t, err)
			_, err = s.Expire(ctx, c.Ref(), "late")
			return term.ID, err
		}},
		{"terminate: lease still live", ClauseLease, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			_, err := s.Terminate(ctx, r.Key, Termination{IfExpired: true})
			return r.ID, err
		}},
		{"terminate: other assignment", ClauseAssignment, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			_, err := s.Terminate(ctx, r.Key, Termination{Assignment: "old"})
			return r.ID, err
		}},
		{"terminate: twice", ClauseState, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			term, err := s.Terminate(ctx, r.Key, Termination{Assignment: r.Assignment})
			must(t, err)
			_, err = s.Terminate(ctx, r.Key, Termination{IfExpired: true})
			return term.ID, err
		}},
		{"signal: old assignment", ClauseAssignment, func(t *testing.T) (string, error) {
			r := running(t, s, id(), "r1")
			old := r.Assignment
			idle, err := s.Release(ctx, r.Ref(), "r1", time.Minute, nil)
			must(t, err)
			return idle.ID, s.PutSignal(ctx, r.Key, old, SignalRemoveRegOK, "")
		}},
		{"heartbeat: terminated", ClauseState, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			_, err := s.Terminate(ctx, c.Key, Termination{Assignment: c.Assignment})
			must(t, err)
			return c.ID, s.Heartbeat(ctx, c.Key)
		}},
		{"heartbeat: no record (agent never creates one)", ClauseExists, func(t *testing.T) (string, error) {
			err := s.Heartbeat(ctx, "i-ghost")
			if _, gerr := s.Get(ctx, "i-ghost"); !IsNotFound(gerr) {
				t.Fatalf("heartbeat created a record: %v", gerr)
			}
			return "", err
		}},
		{"runner: other assignment", ClauseAssignment, func(t *testing.T) (string, error) {
			c := created(t, s, id(), "r1")
			return c.ID, s.SetRunner(ctx, c.Key, "old", 42, "ghr-1-"+c.ID)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			instID, err := tc.apply(t)
			wantClause(t, err, tc.want)
			var ce *ConditionError
			if !errors.As(err, &ce) || ce.Detail == "" {
				t.Fatalf("no detail in %v", err)
			}
			if instID == "" {
				return
			}
			// The refused write changed nothing: the record is still the one
			// the error reports.
			stored, err := s.Get(ctx, InstanceKey(testRole, instID))
			must(t, err)
			if ce.Current == nil || ce.Current.Version != stored.Version {
				t.Fatalf("the error's record (%+v) is not the stored one (version %d)", ce.Current, stored.Version)
			}
		})
	}
}

// TestSignalsBoundToAssignment: a signal of an earlier assignment, even for
// the same runId (a re-run), never satisfies a new wait.
func TestSignalsBoundToAssignment(t *testing.T) {
	s, _ := newStore(t)
	p := pooled(t, s, "i-sig1")
	// The pooled record carries UD_REG_OK from its first run.
	if _, ok := p.SignalFor(SignalRegOK); ok {
		t.Fatal("UD_REG_OK of the first assignment counted for the pooled assignment")
	}
	c, err := s.Claim(ctx, p.Key, claimReq("seed-i-sig1")) // same runId as the first run
	must(t, err)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = s.WaitSignal(short, c.Key, c.Assignment, SignalRegOK, SignalRegFailed, 50*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on a stale signal = %v, want the deadline", err)
	}

	must(t, s.PutSignal(ctx, c.Key, c.Assignment, SignalRegFailed, "token expired"))
	_, err = s.WaitSignal(ctx, c.Key, c.Assignment, SignalRegOK, SignalRegFailed, 50*time.Millisecond)
	var sf *SignalFailedError
	if !errors.As(err, &sf) || sf.Detail != "token expired" {
		t.Fatalf("wait after UD_REG_FAILED = %v, want SignalFailedError with the detail", err)
	}

	must(t, s.PutSignal(ctx, c.Key, c.Assignment, SignalRegOK, ""))
	got, err := s.WaitSignal(ctx, c.Key, c.Assignment, SignalRegOK, SignalRegFailed, 50*time.Millisecond)
	must(t, err)
	if got.Signals[SignalRegFailed].Detail != "token expired" {
		t.Fatal("one signal overwrote another's slot")
	}

	// The record moves on: a wait for the old assignment ends at once.
	_, err = s.Expire(ctx, got.Ref(), "test")
	must(t, err)
	_, err = s.Terminate(ctx, got.Key, Termination{IfExpired: true})
	must(t, err)
	_, err = s.WaitSignal(ctx, c.Key, c.Assignment, SignalRemoveRegOK, SignalRemoveRegFailed, 50*time.Millisecond)
	wantClause(t, err, ClauseState)
}

func TestAgentWrites(t *testing.T) {
	s, clk := newStore(t)
	c := created(t, s, "i-agent", "r1")
	if c.Registration != nil {
		t.Fatal("unexpected registration")
	}
	clk.Add(5 * time.Second)
	must(t, s.Heartbeat(ctx, c.Key))
	must(t, s.SetRunner(ctx, c.Key, c.Assignment, 42, "ghr-1-i-agent"))
	got, err := s.Get(ctx, c.Key)
	must(t, err)
	if got.HeartbeatAt != clk.Now().Unix() || got.GithubRunnerID != 42 || got.RunnerName != "ghr-1-i-agent" {
		t.Fatalf("record = %+v", got)
	}
	if err := s.PutSignal(ctx, c.Key, c.Assignment, "UD_MADE_UP", ""); err == nil {
		t.Fatal("unknown signal accepted")
	}
	must(t, s.SetRunner(ctx, c.Key, c.Assignment, 0, ""))
	got, err = s.Get(ctx, c.Key)
	must(t, err)
	if got.GithubRunnerID != 0 || got.RunnerName != "" {
		t.Fatalf("runner not cleared: %+v", got)
	}
}

func TestRegistrationOnlyForItsAssignment(t *testing.T) {
	s, _ := newStore(t)
	p := pooled(t, s, "i-reg")
	req := claimReq("r2")
	req.Registration = &Registration{Purpose: PurposeRegister, Token: "secret-token", URL: "https://github.com/acme"}
	c, err := s.Claim(ctx, p.Key, req)
	must(t, err)
	if c.Registration == nil || c.Registration.Assignment != c.Assignment || c.Registration.Token != "secret-token" {
		t.Fatalf("registration = %+v", c.Registration)
	}
	if got := fmt.Sprint(c.Registration); got == "" || strings.Contains(got, "secret-token") {
		t.Fatalf("registration prints its token: %s", got)
	}
	// Registering drops the material.
	must(t, s.SetRunner(ctx, c.Key, c.Assignment, 7, "ghr-2-i-reg"))
	got, err := s.Get(ctx, c.Key)
	must(t, err)
	if got.Registration != nil {
		t.Fatal("registration material kept after the runner registered")
	}
}

func TestCreateRetriedAfterItsWriteLandedSucceeds(t *testing.T) {
	s, _ := newStore(t)
	n := NewInstance{ID: "i-retried", RoleID: testRole, Pool: testPool, Owner: "acme", RunID: "run-1", Assignment: NewAssignment(), TTL: time.Minute}
	if _, err := s.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	// The SDK retries a PutItem DynamoDB stored but answered with a 5xx: the
	// retry meets its own record.
	again, err := s.Create(ctx, n)
	if err != nil || again.Assignment != n.Assignment {
		t.Fatalf("a retried create of the same record = %v, %v; want it done", again, err)
	}
	other := n
	other.Assignment = NewAssignment()
	if _, err := s.Create(ctx, other); ClauseOf(err) != ClauseExists {
		t.Fatalf("a create for another assignment over an existing record = %v, want refused (exists)", err)
	}
}

// landedTwice stores every write and then lets it be sent again, as the SDK
// does when DynamoDB stored a write but answered 500: the second send meets
// the record the first one left.
type landedTwice struct{ DynamoDBAPI }

func (l landedTwice) UpdateItem(c context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if _, err := l.DynamoDBAPI.UpdateItem(c, in, o...); err != nil {
		return nil, err
	}
	return l.DynamoDBAPI.UpdateItem(c, in, o...)
}

func TestATransitionRetriedAfterItLandedSucceeds(t *testing.T) {
	s, clk := newStore(t)
	retried := New(landedTwice{s.db}, s.Table())
	retried.Now = clk.Now
	inst := created(t, s, "i-landed", "run-1")
	if err := retried.PutSignal(ctx, inst.Key, inst.Assignment, SignalRegOK, "ghr-1-i-landed"); err != nil {
		t.Fatalf("signal: %v", err)
	}
	run, err := retried.MarkRunning(ctx, inst.Ref(), time.Hour, time.Hour)
	if err != nil || run.State != Running {
		t.Fatalf("→running: %v, %v", run, err)
	}
	idle, err := retried.Release(ctx, run.Ref(), "run-1", time.Hour, nil)
	if err != nil || idle.State != Idle {
		t.Fatalf("running→idle: %v, %v", idle, err)
	}
	must(t, s.PutSignal(ctx, idle.Key, idle.Assignment, SignalRemoveRegOK, ""))
	claimed, err := retried.Claim(ctx, idle.Key, ClaimRequest{RunID: "run-2", Pool: testPool, Owner: testOwner, ClaimTTL: time.Minute})
	if err != nil || claimed.State != Claimed || claimed.RunID != "run-2" {
		t.Fatalf("idle→claimed: %v, %v", claimed, err)
	}
	// A real lost race still loses.
	if _, err := retried.Claim(ctx, idle.Key, ClaimRequest{RunID: "run-3", Pool: testPool, Owner: testOwner, ClaimTTL: time.Minute}); ClauseOf(err) != ClauseState {
		t.Fatalf("a second claim = %v, want refused (state)", err)
	}
}
