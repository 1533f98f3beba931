package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	logtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	ecstypes "github.com/aws/aws-sdk-go-v2/service/ecs/types"
)

// taskOutput is a task's stdout and stderr: each line goes to the sandbox
// logs, and to the container's awslogs log group in moto when its
// logConfiguration says awslogs, in the stream ECS names
// "<awslogs-stream-prefix>/<container name>/<task id>", a batch a second,
// written as the task execution role.
type taskOutput struct {
	prefix string
	logs   io.Writer
	api    *cloudwatchlogs.Client
	group  string
	stream string
	create bool // awslogs-create-group

	mu      sync.Mutex
	partial []byte
	pending []logtypes.InputLogEvent
	made    bool // the stream exists
	failed  bool // a write failed: said once, then dropped
}

// ecsLogPrefix starts every line a task writes to the sandbox's log.
const ecsLogPrefix = "ecs "

func (t *ecsTasks) output(sv *ecsService, id string, c ecstypes.ContainerDefinition, api *cloudwatchlogs.Client) (io.Writer, func()) {
	o := &taskOutput{prefix: fmt.Sprintf(ecsLogPrefix+"%s/%s task %s: ", sv.cluster, sv.name, id[:8]), logs: t.logs}
	if lc := c.LogConfiguration; lc != nil && lc.LogDriver == ecstypes.LogDriverAwslogs {
		o.api, o.group = api, lc.Options["awslogs-group"]
		o.stream = id
		if p := lc.Options["awslogs-stream-prefix"]; p != "" {
			o.stream = p + "/" + aws.ToString(c.Name) + "/" + id
		}
		o.create = lc.Options["awslogs-create-group"] == "true"
	}
	if o.api == nil || o.group == "" {
		return o, func() { o.flushPartial() }
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				o.send(context.Background())
			}
		}
	}()
	var once sync.Once
	return o, func() {
		once.Do(func() {
			close(done)
			<-stopped
			o.flushPartial()
			o.send(context.Background())
		})
	}
}

func (o *taskOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.line(string(o.partial[:i]))
		o.partial = o.partial[i+1:]
	}
	return len(p), nil
}

func (o *taskOutput) flushPartial() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.partial) > 0 {
		o.line(string(o.partial))
		o.partial = nil
	}
}

// line is called with o.mu held.
func (o *taskOutput) line(s string) {
	fmt.Fprintf(o.logs, "%s%s\n", o.prefix, s)
	if o.api != nil && !o.failed {
		o.pending = append(o.pending, logtypes.InputLogEvent{Message: aws.String(s), Timestamp: aws.Int64(time.Now().UnixMilli())})
	}
}

// send puts the pending lines into the log stream.
func (o *taskOutput) send(ctx context.Context) {
	o.mu.Lock()
	batch := o.pending
	o.pending = nil
	made := o.made
	o.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !made {
		if o.create {
			_, _ = o.api.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(o.group)}) // exists already: fine
		}
		_, err := o.api.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(o.group), LogStreamName: aws.String(o.stream)})
		if err != nil {
			o.fail(fmt.Errorf("create log stream %s in %s: %w", o.stream, o.group, err))
			return
		}
		o.mu.Lock()
		o.made = true
		o.mu.Unlock()
	}
	if _, err := o.api.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(o.group), LogStreamName: aws.String(o.stream), LogEvents: batch}); err != nil {
		o.fail(fmt.Errorf("put log events into %s %s: %w", o.group, o.stream, err))
	}
}

func (o *taskOutput) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.failed {
		o.failed = true
		fmt.Fprintf(o.logs, "%sawslogs: %v (its lines go to the sandbox log only from now on)\n", o.prefix, err)
	}
}
