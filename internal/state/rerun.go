package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The re-run of jobs lost to spot interruptions. When refresh closes the
// record of an instance EC2 took back after its notice, the run it served
// is told (NoteRunInterrupted); a scale set's standing run knows its job's
// workflow run (Run.Job), and its failed jobs are re-run once through
// GitHub's API: one item per workflow run (pk rerun#<repository>#<id>),
// put only if absent, so a workflow run is re-run at most once however
// many of its instances EC2 took and however often refresh runs. GitHub
// re-runs jobs only once their workflow run has completed: the item waits
// in its pool's pending set (pk reruns#<pool>) and refresh tries again.
//
// At most once: before it asks GitHub, refresh moves the item from
// pending to requesting with a conditional write; only a refusal GitHub
// answered (a 403: nothing was re-run) moves it back to pending.

const kindRerun = "rerun"

// Rerun statuses.
const (
	RerunPending    = "pending"    // waiting for its workflow run to complete
	RerunRequesting = "requesting" // refresh is asking GitHub
	RerunDone       = "rerun"      // GitHub accepted the re-run
	RerunFailed     = "failed"     // GitHub refused for good, or the outcome is unknown
	RerunGaveUp     = "gave-up"    // the workflow run did not complete in time
)

// rerunsKeepFor: a rerun item outlives the 30 days within which GitHub
// lets a run be re-run, so that none is re-run twice.
const rerunsKeepFor = 31 * 24 * time.Hour

// Rerun is the re-run of one workflow run's failed jobs.
type Rerun struct {
	Repository    string `dynamodbav:"repository" json:"repository"`
	WorkflowRunID int64  `dynamodbav:"workflowRunId" json:"workflowRunId"`
	// Pool whose pending set holds it; Run the standing run that asked.
	Pool   string `dynamodbav:"pool" json:"pool"`
	Run    string `dynamodbav:"run" json:"run"`
	Status string `dynamodbav:"status" json:"status"`
	// Since is when it was asked for, TriedAt when GitHub was last asked,
	// Tries how often (the control plane's clock, unix seconds).
	Since   int64 `dynamodbav:"since" json:"since"`
	TriedAt int64 `dynamodbav:"triedAt,omitempty" json:"triedAt,omitempty"`
	Tries   int   `dynamodbav:"tries" json:"tries"`
	// Detail is GitHub's last answer.
	Detail string `dynamodbav:"detail,omitempty" json:"detail,omitempty"`
}

// RerunKey is the key of a workflow run's rerun item.
func RerunKey(repository string, workflowRunID int64) string {
	return "rerun#" + repository + "#" + strconv.FormatInt(workflowRunID, 10)
}

// Key is the rerun's item key.
func (r *Rerun) Key() string { return RerunKey(r.Repository, r.WorkflowRunID) }

func pendingRerunsKey(pool string) string { return "reruns#" + pool }

type rerunItem struct {
	Key       string `dynamodbav:"pk"`
	Kind      string `dynamodbav:"kind"`
	ExpiresAt int64  `dynamodbav:"expiresAt"`
	Rerun
}

// SetRunJob records the job a scale set's standing run took.
func (s *Runs) SetRunJob(ctx context.Context, runID string, job RunJob) error {
	b := newBuilder()
	_, err := s.updateRun(ctx, runID, "record job", b,
		"SET "+b.name("job")+" = "+b.value(job)+", "+b.name("updatedAt")+" = "+b.value(s.now()),
		"attribute_exists("+b.name("scaleSet")+")", nil)
	return err
}

// NoteRunInterrupted records in a run that EC2 took back instanceID after
// its spot interruption notice, and what was done about its job.
// An empty instanceID updates what was done only.
func (s *Runs) NoteRunInterrupted(ctx context.Context, runID, instanceID, rerun string) (*Run, error) {
	b := newBuilder()
	update := "SET " + b.name("rerun") + " = " + b.value(rerun) + ", " + b.name("updatedAt") + " = " + b.value(s.now())
	if instanceID != "" {
		update += " ADD " + b.name("interrupted") + " " + b.value(stringSet{instanceID})
	}
	return s.updateRun(ctx, runID, "note interruption", b, update, "attribute_exists("+b.name("kind")+")", nil)
}

// RequestRerun puts a pending rerun for r's workflow run unless one exists
// (created false: the run was re-run, or is waiting, already) and adds it
// to its pool's pending set.
func (s *Reruns) RequestRerun(ctx context.Context, r Rerun) (created bool, err error) {
	now := s.now()
	r.Status, r.Since, r.Tries, r.TriedAt = RerunPending, now, 0, 0
	item, err := attributevalue.MarshalMap(rerunItem{Key: r.Key(), Kind: kindRerun, ExpiresAt: now + secs(rerunsKeepFor), Rerun: r})
	if err != nil {
		return false, err
	}
	b := newBuilder()
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(" + b.name(AttrPK) + ")"), ExpressionAttributeNames: b.attrNames()})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("request the re-run of %s: %w", r.Key(), err)
	}
	return true, s.pendingSet(ctx, r.Pool, "ADD", r.Key())
}

// pendingSet adds a rerun key to its pool's pending set or deletes it.
func (s *Reruns) pendingSet(ctx context.Context, pool, op, key string) error {
	b := newBuilder()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(pendingRerunsKey(pool)),
		UpdateExpression:         aws.String(op + " " + b.name("pending") + " " + b.value(stringSet{key}) + " SET " + b.name("kind") + " = " + b.value("reruns")),
		ExpressionAttributeNames: b.attrNames(), ExpressionAttributeValues: b.attrValues()})
	if err != nil {
		return fmt.Errorf("pending re-runs of pool %s: %w", pool, err)
	}
	return nil
}

// DropPendingRerun takes a rerun out of its pool's pending set.
func (s *Reruns) DropPendingRerun(ctx context.Context, r Rerun) error {
	return s.pendingSet(ctx, r.Pool, "DELETE", r.Key())
}

// PendingReruns reads the reruns of a pool's pending set (in any status:
// the caller drops those no longer pending).
func (s *Reruns) PendingReruns(ctx context.Context, pool string) ([]Rerun, error) {
	var set struct {
		Pending []string `dynamodbav:"pending,stringset"`
	}
	if _, err := s.getItem(ctx, pendingRerunsKey(pool), &set); err != nil {
		return nil, err
	}
	var out []Rerun
	for _, key := range set.Pending {
		r, err := s.GetRerun(ctx, key)
		if IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *r)
	}
	return out, nil
}

// GetRerun reads a rerun item.
func (s *Reruns) GetRerun(ctx context.Context, key string) (*Rerun, error) {
	var it rerunItem
	ok, err := s.getItem(ctx, key, &it)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("rerun %s: %w", key, ErrNotFound)
	}
	return &it.Rerun, nil
}

// MoveRerun moves a rerun from status from to to, noting GitHub's answer
// (detail) and, when tried, one more try now. A rerun no longer in from
// is a ConditionError with ClauseStatus: someone else moved it.
func (s *Reruns) MoveRerun(ctx context.Context, r Rerun, from, to, detail string, tried bool) (*Rerun, error) {
	b := newBuilder()
	update := "SET " + b.name("status") + " = " + b.value(to) + ", " + b.name("detail") + " = " + b.value(detail)
	if tried {
		update += ", " + b.name("triedAt") + " = " + b.value(s.now()) + " ADD " + b.name("tries") + " " + b.value(1)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(r.Key()),
		UpdateExpression:         aws.String(update),
		ConditionExpression:      aws.String(b.name("status") + " = " + b.value(from)),
		ExpressionAttributeNames: b.attrNames(), ExpressionAttributeValues: b.attrValues(), ReturnValues: types.ReturnValueAllNew})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil, &ConditionError{Key: r.Key(), Transition: "rerun " + from + "→" + to, Clause: ClauseStatus, Detail: "the rerun is no longer " + from}
	}
	if err != nil {
		return nil, fmt.Errorf("rerun %s %s→%s: %w", r.Key(), from, to, err)
	}
	var it rerunItem
	if err := attributevalue.UnmarshalMap(out.Attributes, &it); err != nil {
		return nil, err
	}
	return &it.Rerun, nil
}
