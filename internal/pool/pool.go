// Package pool is the SQS resource pool of docs/design.md: release sends a
// message for a clean idle instance; provision receives, matches and claims.
// The queue is only a hint. DynamoDB is the truth: a claim is a conditional
// write, so a duplicate or stale message can never claim an instance twice.
package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
)

// SQSAPI holds only the SQS calls the pool makes.
type SQSAPI interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// Message is the body of a pool message. IdleUntil is the instance's idle
// lease (never its running lease, which says nothing of an idle
// instance), informative only: the claim decides.
type Message struct {
	InstanceID   string `json:"instanceId"`
	Pool         string `json:"pool"`
	InstanceType string `json:"instanceType"`
	UsageClass   string `json:"usageClass"`
	IdleUntil    int64  `json:"idleUntil"`
}

// Validate reports the first missing field.
func (m Message) Validate() error {
	switch {
	case m.InstanceID == "":
		return errors.New("instanceId: required")
	case m.Pool == "":
		return errors.New("pool: required")
	case m.InstanceType == "":
		return errors.New("instanceType: required")
	case !state.ValidUsageClass(m.UsageClass):
		return fmt.Errorf("usageClass: %q must be spot or on-demand", m.UsageClass)
	case m.IdleUntil <= 0:
		return errors.New("idleUntil: required (unix seconds)")
	}
	return nil
}

// Queue is one pool's queue.
type Queue struct {
	client SQSAPI
	url    string
	// WaitSeconds is the long poll of one receive (1-2 s: long enough not to
	// miss messages that exist, short enough for a provision to move on).
	WaitSeconds int32
	// Visibility hides a received message while the claim is decided.
	Visibility int32
	// Parallel bounds the claims in flight.
	Parallel int
}

// New returns the pool queue at url.
func New(client SQSAPI, url string) *Queue {
	return &Queue{client: client, url: url, WaitSeconds: 1, Visibility: 30, Parallel: 10}
}

// URL is the queue's URL.
func (q *Queue) URL() string { return q.url }

// Send puts a message for a clean idle instance into the pool.
func (q *Queue) Send(ctx context.Context, m Message) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("pool message: %w", err)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if _, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(string(body))}); err != nil {
		return fmt.Errorf("send pool message for %s: %w", m.InstanceID, err)
	}
	return nil
}

// Outcome is what a claim decided about one message.
type Outcome int

const (
	// Claimed: the instance is ours; the message is deleted.
	Claimed Outcome = iota
	// Stale: the instance is gone, taken or not reusable; the message is deleted.
	Stale
	// PutBack: not for this request (e.g. another owner); the message returns at once.
	PutBack
)

// ClaimFunc tries to claim the instance of a matching message. An error means
// the claim could not be decided (e.g. DynamoDB unreachable): the message is
// put back and Take stops with the error.
type ClaimFunc func(ctx context.Context, m Message) (Outcome, error)

// Result tells what Take did.
type Result struct {
	Claimed   []Message
	Exhausted bool // the pool had no more matching messages
	Received  int
	Stale     int // deleted: claim refused, or unreadable body
	PutBack   int // returned to the queue: not matching, not needed, or undecided
}

// Take receives messages until want instances are claimed or the pool is
// exhausted: an empty long poll, or two receives in a row that bring no
// message not already seen. A message is deleted only after its claim was
// decided, so a crash midway loses nothing: the message reappears after its
// visibility timeout and the conditional claim sorts it out.
func (q *Queue) Take(ctx context.Context, want int, match Matcher, claim ClaimFunc) (Result, error) {
	var res Result
	seen := map[string]bool{}
	noNew := 0
	for len(res.Claimed) < want {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		msgs, err := q.receive(ctx, want-len(res.Claimed))
		if err != nil {
			return res, err
		}
		res.Received += len(msgs)
		if len(msgs) == 0 {
			res.Exhausted = true
			return res, nil
		}
		fresh := 0
		for _, m := range msgs {
			if !seen[aws.ToString(m.MessageId)] {
				fresh++
				seen[aws.ToString(m.MessageId)] = true
			}
		}
		if err := q.decide(ctx, msgs, want-len(res.Claimed), match, claim, &res); err != nil {
			return res, err
		}
		if fresh == 0 {
			if noNew++; noNew >= 2 {
				res.Exhausted = true
				return res, nil
			}
		} else {
			noNew = 0
		}
	}
	return res, nil
}

func (q *Queue) receive(ctx context.Context, n int) ([]types.Message, error) {
	if n > 10 {
		n = 10
	}
	wait := q.WaitSeconds
	if dl, ok := ctx.Deadline(); ok {
		if left := int32(time.Until(dl) / time.Second); left < wait {
			wait = max(left, 0)
		}
	}
	out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(q.url),
		MaxNumberOfMessages: int32(n),
		WaitTimeSeconds:     wait,
		VisibilityTimeout:   q.Visibility,
	})
	if err != nil {
		return nil, fmt.Errorf("receive from pool: %w", err)
	}
	return out.Messages, nil
}

// decide claims up to need matching messages in parallel, then deletes the
// decided ones and puts the rest back, each with one batch call.
func (q *Queue) decide(ctx context.Context, msgs []types.Message, need int, match Matcher, claim ClaimFunc, res *Result) error {
	var del, back []types.Message
	type candidate struct {
		raw types.Message
		msg Message
	}
	var cands []candidate
	for _, raw := range msgs {
		var m Message
		if json.Unmarshal([]byte(aws.ToString(raw.Body)), &m) != nil || m.Validate() != nil {
			del = append(del, raw) // unreadable: it can never be claimed
			res.Stale++
			continue
		}
		if !match.Match(m) || len(cands) >= need {
			back = append(back, raw)
			res.PutBack++
			continue
		}
		cands = append(cands, candidate{raw, m})
	}

	outcomes := make([]Outcome, len(cands))
	errs := make([]error, len(cands))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(q.Parallel, 1))
	for i, c := range cands {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			outcomes[i], errs[i] = claim(ctx, c.msg)
		}()
	}
	wg.Wait()

	var firstErr error
	for i, c := range cands {
		switch {
		case errs[i] != nil:
			back = append(back, c.raw)
			res.PutBack++
			if firstErr == nil {
				firstErr = fmt.Errorf("claim %s: %w", c.msg.InstanceID, errs[i])
			}
		case outcomes[i] == Claimed:
			del = append(del, c.raw)
			res.Claimed = append(res.Claimed, c.msg)
		case outcomes[i] == Stale:
			del = append(del, c.raw)
			res.Stale++
		default:
			back = append(back, c.raw)
			res.PutBack++
		}
	}
	// A failed delete or put-back loses nothing: the message reappears after
	// its visibility timeout and the claim, being conditional, sorts it out.
	q.deleteAll(ctx, del)
	q.putBack(ctx, back)
	return firstErr
}

func (q *Queue) deleteAll(ctx context.Context, msgs []types.Message) {
	if len(msgs) == 0 {
		return
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
	}
	q.client.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
}

func (q *Queue) putBack(ctx context.Context, msgs []types.Message) {
	if len(msgs) == 0 {
		return
	}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
	}
	q.client.ChangeMessageVisibilityBatch(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q.url), Entries: entries})
}
