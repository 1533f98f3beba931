package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/streampoll"
)

// streams plays the Lambda event source mappings terraform created (kept by
// the moto proxy, awstest, never by moto itself) from DynamoDB streams, as
// Lambda does:
// each enabled mapping's stream is read from its starting position, the
// records its filter passes are handed to its function in batches of at
// most its batch size, and a partial batch response makes the shard be
// read again from the first failed record.
type streams struct {
	fns    *functions
	moto   *awstest.Moto
	logs   io.Writer
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	pollers map[string]*streampoll.Poller // by mapping UUID
}

func startStreams(fns *functions, moto *awstest.Moto, logs io.Writer) *streams {
	ctx, cancel := context.WithCancel(context.Background())
	s := &streams{fns: fns, moto: moto, logs: logs, cancel: cancel, done: make(chan struct{}),
		pollers: map[string]*streampoll.Poller{}}
	go s.loop(ctx)
	return s
}

func (s *streams) stop() {
	s.cancel()
	<-s.done
}

func (s *streams) loop(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		for _, m := range s.moto.Mappings() {
			if aws.ToString(m.State) != "Enabled" {
				continue
			}
			if err := s.serve(ctx, m); err != nil && ctx.Err() == nil {
				fmt.Fprintf(s.logs, "sandbox: streams: %s: %v\n", aws.ToString(m.FunctionArn), err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// serve reads one mapping's new records and hands them to its function.
func (s *streams) serve(ctx context.Context, m lambdatypes.EventSourceMappingConfiguration) error {
	id := aws.ToString(m.UUID)
	s.mu.Lock()
	p := s.pollers[id]
	s.mu.Unlock()
	if p == nil {
		var err error
		if p, err = streampoll.Open(ctx, s.moto.URL, Region, aws.ToString(m.EventSourceArn), string(m.StartingPosition)); err != nil {
			return err
		}
		s.mu.Lock()
		s.pollers[id] = p
		s.mu.Unlock()
	}
	batches, err := p.Poll(ctx)
	if err != nil {
		return err
	}
	fn := functionName(aws.ToString(m.FunctionArn))
	for _, b := range batches {
		var ev struct{ Records []json.RawMessage }
		if err := json.Unmarshal(b.Event, &ev); err != nil {
			return err
		}
		var pass []json.RawMessage
		for _, r := range ev.Records {
			if passes(m.FilterCriteria, r) {
				pass = append(pass, r)
			}
		}
		size := max(int(aws.ToInt32(m.BatchSize)), 1)
		for start := 0; start < len(pass); start += size {
			chunk := pass[start:min(start+size, len(pass))]
			payload, _ := json.Marshal(map[string]any{"Records": chunk})
			res, err := s.fns.invoke(ctx, fn, payload, true)
			if err == nil && res.FunctionError != "" {
				err = fmt.Errorf("%s: %s", res.FunctionError, res.Payload)
			}
			var answer events.DynamoDBEventResponse
			if err == nil {
				json.Unmarshal(res.Payload, &answer)
			}
			first := ""
			switch {
			case err != nil:
				// The whole batch is retried, from its first record.
				first = sequenceOf(chunk[0])
			case len(answer.BatchItemFailures) > 0:
				first = answer.BatchItemFailures[0].ItemIdentifier
			}
			if first != "" {
				if rerr := p.Retry(ctx, b.Shard, first); rerr != nil {
					return rerr
				}
				if err != nil {
					return err
				}
				break // the rest comes again from the retried record on
			}
		}
	}
	return nil
}

func sequenceOf(record json.RawMessage) string {
	var r struct {
		Dynamodb struct{ SequenceNumber string }
	}
	json.Unmarshal(record, &r)
	return r.Dynamodb.SequenceNumber
}

// passes applies a mapping's filter criteria to one record as Lambda's
// event filtering does: a record passes when any filter's pattern matches
// it (no criteria: every record). Patterns hold nested objects and, at the
// leaves, lists of values or {"exists": bool}: the forms ghrunner uses.
func passes(c *lambdatypes.FilterCriteria, record json.RawMessage) bool {
	if c == nil || len(c.Filters) == 0 {
		return true
	}
	var r any
	if json.Unmarshal(record, &r) != nil {
		return false
	}
	for _, f := range c.Filters {
		var pattern map[string]any
		if json.Unmarshal([]byte(aws.ToString(f.Pattern)), &pattern) == nil && matches(pattern, r) {
			return true
		}
	}
	return false
}

func matches(pattern map[string]any, value any) bool {
	obj, _ := value.(map[string]any)
	for k, want := range pattern {
		got, present := obj[k]
		switch w := want.(type) {
		case map[string]any:
			if !present || !matches(w, got) {
				return false
			}
		case []any:
			ok := false
			for _, alt := range w {
				if m, isMap := alt.(map[string]any); isMap {
					if exists, isBool := m["exists"].(bool); isBool && exists == present {
						ok = true
					}
				} else if present && alt == got {
					ok = true
				}
			}
			if !ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}
