package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// RunStatus is the status of one provision request.
type RunStatus string

const (
	RunProvisioning RunStatus = "provisioning"
	RunReady        RunStatus = "ready"
	RunReleased     RunStatus = "released"
	RunFailed       RunStatus = "failed"
	kindRun                   = "run"
	runsKeepFor               = 7 * 24 * time.Hour
)

// Run is the item of one provision request (pk run#<runId>). It makes
// provision idempotent for a runId and lets release stop a provision that is
// still waiting. Its run id is not stored as runId, which would put the run
// item into the by-run index of instances.
type Run struct {
	Key           string    `dynamodbav:"pk"`
	Kind          string    `dynamodbav:"kind"`
	ID            string    `dynamodbav:"run"`
	Pool          string    `dynamodbav:"pool"`
	Owner         string    `dynamodbav:"owner,omitempty"`
	InstanceCount int       `dynamodbav:"instanceCount"`
	Request       string    `dynamodbav:"request"` // the canonical request, to spot a different payload for the same runId
	Status        RunStatus `dynamodbav:"status"`
	InstanceIDs   []string  `dynamodbav:"instanceIds,stringset,omitempty"`
	// GivenUp are the instances its provision gave up (and has not taken
	// back since): they are no longer the run's, whatever their records
	// say (a record write can fail while the run moves on).
	GivenUp   []string `dynamodbav:"givenUp,stringset,omitempty"`
	Detail    string   `dynamodbav:"detail,omitempty"`
	CreatedAt int64    `dynamodbav:"createdAt"`
	UpdatedAt int64    `dynamodbav:"updatedAt"`
	ExpiresAt int64    `dynamodbav:"expiresAt"`
	// Label is what the run's runners register with and its jobs name in
	// runs-on, minted by provision (ghr-<runId>-<16 random characters>).
	Label string `dynamodbav:"label,omitempty"`
	// Whose run it is, from the verified OIDC token of the job that
	// provisioned it: only that workflow run may join or release it
	// (controlplane.Owns). Empty on runs made before runs were bound.
	RepositoryID  string `dynamodbav:"repositoryId,omitempty"`
	Repository    string `dynamodbav:"repository,omitempty"` // for messages: names change
	WorkflowRunID string `dynamodbav:"workflowRunId,omitempty"`
	RunAttempt    string `dynamodbav:"runAttempt,omitempty"` // the attempt that provisioned it
	// ScaleSet is the runner scale set (its id at GitHub) whose listener
	// made this run: a standing run of one instance whose runner the
	// listener mints from the scale set, for one job. No other
	// configuration is minted for it (controlplane.MintWhy), and the
	// listener releases it when its job ends. Empty for a workflow's run.
	ScaleSet string `dynamodbav:"scaleSet,omitempty"`
	// Job is the job a scale set's standing run took, as GitHub's
	// JobStarted message named it (the listener writes it): what a re-run
	// after a spot interruption asks GitHub to run again (rerun.go).
	Job *RunJob `dynamodbav:"job,omitempty"`
	// Interrupted are the run's instances EC2 took back after their spot
	// interruption notice, and Rerun what refresh did about their jobs
	// (rerun.go): for people, nothing decides on them.
	Interrupted []string `dynamodbav:"interrupted,stringset,omitempty"`
	Rerun       string   `dynamodbav:"rerun,omitempty"`
}

// RunJob is the job of a standing run: its repository (acme/api) and its
// workflow run's id at GitHub.
type RunJob struct {
	Repository    string `dynamodbav:"repository" json:"repository"`
	WorkflowRunID int64  `dynamodbav:"workflowRunId" json:"workflowRunId"`
	// QueuedAt and StartedAt are the message's QueueTime and
	// RunnerAssignTime (unix seconds, GitHub's clock; 0 when the message
	// had none): the job's queue time in the cost report.
	QueuedAt  int64 `dynamodbav:"queuedAt,omitempty" json:"queuedAt,omitempty"`
	StartedAt int64 `dynamodbav:"startedAt,omitempty" json:"startedAt,omitempty"`
}

// QueueSeconds is how long GitHub says the job queued before a runner took
// it; false when a stamp is missing or they are out of order.
func (j *RunJob) QueueSeconds() (int64, bool) {
	if j == nil || j.QueuedAt <= 0 || j.StartedAt < j.QueuedAt {
		return 0, false
	}
	return j.StartedAt - j.QueuedAt, true
}

// RunKey is the partition key of a run item.
func RunKey(runID string) string { return "run#" + runID }

// StartRun puts the run item if absent. When it exists already with the same
// request it is returned with created=false, so a retried provision joins it;
// a different request for the same runId is refused with ClausePayload.
func (s *Runs) StartRun(ctx context.Context, r Run) (run *Run, created bool, err error) {
	now := s.now()
	r.Key, r.Kind, r.Status = RunKey(r.ID), kindRun, RunProvisioning
	r.CreatedAt, r.UpdatedAt, r.ExpiresAt = now, now, now+secs(runsKeepFor)
	item, err := attributevalue.MarshalMap(r)
	if err != nil {
		return nil, false, fmt.Errorf("encode run %s: %w", r.ID, err)
	}
	b := newBuilder()
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(" + b.name(AttrPK) + ")"),
		ExpressionAttributeNames: b.attrNames(),
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return &r, true, nil
	case !errors.As(err, &ccf):
		return nil, false, fmt.Errorf("start run %s: %w", r.ID, err)
	}
	existing, err := s.GetRun(ctx, r.ID)
	if err != nil {
		return nil, false, err
	}
	if existing.Request != r.Request {
		return existing, false, &ConditionError{Key: r.Key, Transition: "start run", Clause: ClausePayload,
			Detail: fmt.Sprintf("run %s was started with another request (%s)", r.ID, existing.Request)}
	}
	return existing, false, nil
}

// GetRun reads a run item with a consistent read.
func (s *Runs) GetRun(ctx context.Context, runID string) (*Run, error) {
	var r Run
	ok, err := s.getItem(ctx, RunKey(runID), &r)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("run %s: %w", runID, ErrNotFound)
	}
	return &r, nil
}

// AddRunInstances records instance ids in a run that is still provisioning
// (one given up earlier and claimed again is the run's again).
func (s *Runs) AddRunInstances(ctx context.Context, runID string, ids ...string) (*Run, error) {
	b := newBuilder()
	return s.updateRun(ctx, runID, "add instances", b,
		"ADD "+b.name("instanceIds")+" "+b.value(stringSet(ids))+" DELETE "+b.name("givenUp")+" "+b.value(stringSet(ids))+
			" SET "+b.name("updatedAt")+" = "+b.value(s.now()),
		b.name("status")+" = "+b.value(string(RunProvisioning)), []RunStatus{RunProvisioning})
}

// GiveUpRunInstance records that the run's provision gave the instance up,
// in any status: nothing is minted for it on the run's behalf any more
// (controlplane.MintWhy), even while its record still names the run.
func (s *Runs) GiveUpRunInstance(ctx context.Context, runID, id string) error {
	b := newBuilder()
	_, err := s.updateRun(ctx, runID, "give up "+id, b,
		"ADD "+b.name("givenUp")+" "+b.value(stringSet{id})+" SET "+b.name("updatedAt")+" = "+b.value(s.now()),
		"attribute_exists("+b.name("kind")+")", nil)
	return err
}

// Member says whether the instance is one of the run's: recorded by its
// provision and not given up.
func (r *Run) Member(instanceID string) bool {
	return slices.Contains(r.InstanceIDs, instanceID) && !slices.Contains(r.GivenUp, instanceID)
}

// SetRunStatus moves a run from one of the from statuses to to, with detail.
func (s *Runs) SetRunStatus(ctx context.Context, runID string, to RunStatus, detail string, from ...RunStatus) (*Run, error) {
	b := newBuilder()
	in := ""
	for i, st := range from {
		if i > 0 {
			in += ", "
		}
		in += b.value(string(st))
	}
	update := "SET " + b.name("status") + " = " + b.value(string(to)) + ", " + b.name("updatedAt") + " = " + b.value(s.now())
	if detail != "" {
		update += ", " + b.name("detail") + " = " + b.value(detail)
	}
	return s.updateRun(ctx, runID, "run →"+string(to), b, update, b.name("status")+" IN ("+in+")", from)
}

func (s *Runs) updateRun(ctx context.Context, runID, name string, b *builder, update, cond string, want []RunStatus) (*Run, error) {
	key := RunKey(runID)
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(key),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String("attribute_exists(" + b.name(AttrPK) + ") AND " + cond),
		ExpressionAttributeNames:            b.attrNames(),
		ExpressionAttributeValues:           b.attrValues(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		cur := &Run{}
		if ccf.Item != nil {
			if derr := attributevalue.UnmarshalMap(ccf.Item, cur); derr != nil {
				return nil, fmt.Errorf("decode %s: %w", key, derr)
			}
		} else if cur, err = s.GetRun(ctx, runID); IsNotFound(err) {
			return nil, &ConditionError{Key: key, Transition: name, Clause: ClauseExists, Detail: "no such run"}
		} else if err != nil {
			return nil, fmt.Errorf("%s of %s refused; reading why failed: %w", name, key, err)
		}
		return nil, &ConditionError{Key: key, Transition: name, Clause: ClauseStatus,
			Detail: fmt.Sprintf("run is %s, want %v", cur.Status, want)}
	case err != nil:
		return nil, fmt.Errorf("%s of %s: %w", name, key, err)
	}
	var r Run
	if err := attributevalue.UnmarshalMap(out.Attributes, &r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return &r, nil
}

// stringSet marshals as a DynamoDB string set.
type stringSet []string

func (ss stringSet) MarshalDynamoDBAttributeValue() (types.AttributeValue, error) {
	return &types.AttributeValueMemberSS{Value: ss}, nil
}
