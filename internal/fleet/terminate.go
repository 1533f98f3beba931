package fleet

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awserr"
)

// TerminateResult says what Terminate did with each id.
type TerminateResult struct {
	Terminated []string // EC2 accepted the termination (or had already done it)
	Gone       []string // EC2 does not know them: nothing left to terminate
}

// Terminate terminates instances, TerminateBatch ids per call. EC2 refuses a
// whole call when one id in it is unknown (InvalidInstanceID.NotFound) or
// malformed, so such a batch is retried id by id: one bad id never shields
// the others. A failed batch does not stop the next ones either; the errors
// are joined. Repeated and empty ids are dropped.
func (f *Fleet) Terminate(ctx context.Context, ids []string) (TerminateResult, error) {
	ids = distinct(ids)
	batch := max(f.TerminateBatch, 1)
	var res TerminateResult
	var errs []error
	for start := 0; start < len(ids); start += batch {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		part := ids[start:min(start+batch, len(ids))]
		err := f.terminate(ctx, part)
		switch {
		case err == nil:
			res.Terminated = append(res.Terminated, part...)
		case awserr.IsNotFound(err) && len(part) == 1:
			res.Gone = append(res.Gone, part...)
		case isBadID(err) && len(part) > 1:
			errs = append(errs, f.terminateOneByOne(ctx, part, &res)...)
		default:
			errs = append(errs, fmt.Errorf("terminate %v: %w", part, err))
		}
	}
	return res, errors.Join(errs...)
}

func (f *Fleet) terminateOneByOne(ctx context.Context, ids []string, res *TerminateResult) []error {
	var errs []error
	for _, id := range ids {
		err := f.terminate(ctx, []string{id})
		switch {
		case err == nil:
			res.Terminated = append(res.Terminated, id)
		case awserr.IsNotFound(err):
			res.Gone = append(res.Gone, id)
		default:
			errs = append(errs, fmt.Errorf("terminate %s: %w", id, err))
		}
	}
	return errs
}

func (f *Fleet) terminate(ctx context.Context, ids []string) error {
	_, err := f.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: ids})
	return err
}

// isBadID reports an error EC2 gives for a whole call because of one id.
func isBadID(err error) bool {
	return awserr.IsNotFound(err) || awserr.Code(err) == "InvalidInstanceID.Malformed"
}

func distinct(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
