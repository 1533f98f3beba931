package state

import "context"

// Writes only tests make, kept out of the product's files: no product code
// clears a registration or writes a JIT configuration without knowing the
// runners served (the control plane uses PutJITServed). They live here, not
// in statetest, because this package's own tests call them and statetest
// imports this package.

// ClearRegistration removes the registration material of assignment once it
// has been used.
func (s *Instances) ClearRegistration(ctx context.Context, key Key, assignment string) error {
	_, err := s.apply(ctx, change{
		transition: "clear registration",
		key:        key,
		checks:     agentBound(assignment),
		remove:     []string{"registration"},
	})
	return err
}

// PutJIT writes reg, the reg.Seq-th just-in-time configuration of
// assignment, while the instance is created, claimed or running for a run
// under that assignment with a live lease, and only as the successor of
// the last one written. A refused write (another run, a release, a number
// already written) returns a *ConditionError; the caller then deletes the
// runner it minted. It reads the record for the runners recorded so far:
// PutJITServed is the write alone.
func (s *Instances) PutJIT(ctx context.Context, key Key, assignment string, reg Registration) (*Instance, error) {
	cur, err := s.Get(ctx, key)
	if err != nil && !IsNotFound(err) {
		return nil, err
	}
	var minted []int64
	if cur != nil {
		minted = cur.JITRunners
	}
	return s.PutJITServed(ctx, key, assignment, reg, 0, minted)
}
