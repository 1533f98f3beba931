package logship

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/cwlogs"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

var env *awstest.Moto

func TestMain(m *testing.M) { os.Exit(awstest.Main(m, &env)) }

var ctx = context.Background()

// group makes a log group in moto, as ghrunner_pool does.
func group(t *testing.T) (*cloudwatchlogs.Client, string) {
	t.Helper()
	c := cwlogs.Client(env.Config(t))
	name := "/ghrunner/test/" + awstest.Name(t, "pool")
	if _, err := c.CreateLogGroup(ctx, &cloudwatchlogs.CreateLogGroupInput{LogGroupName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return c, name
}

// lines reads a stream back, oldest first.
func lines(t *testing.T, c *cloudwatchlogs.Client, group, stream string) []string {
	t.Helper()
	var out []string
	var token *string
	for {
		res, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String(group), LogStreamName: aws.String(stream), StartFromHead: aws.Bool(true), NextToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Events {
			out = append(out, aws.ToString(e.Message))
		}
		if len(res.Events) == 0 || aws.ToString(res.NextForwardToken) == aws.ToString(token) {
			return out
		}
		token = res.NextForwardToken
	}
}

// counting counts the calls and can fail the next PutLogEvents.
type counting struct {
	API
	puts, events atomic.Int64
	maxBatch     atomic.Int64
	failNext     atomic.Bool
}

func (c *counting) PutLogEvents(ctx context.Context, in *cloudwatchlogs.PutLogEventsInput, o ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error) {
	if c.failNext.CompareAndSwap(true, false) {
		return nil, errors.New("ThrottlingException: Rate exceeded")
	}
	c.puts.Add(1)
	c.events.Add(int64(len(in.LogEvents)))
	if n := int64(len(in.LogEvents)); n > c.maxBatch.Load() {
		c.maxBatch.Store(n)
	}
	return c.API.PutLogEvents(ctx, in, o...)
}

func TestLinesReachTheStreamInOrderAndAPartialLineWaitsForItsNewline(t *testing.T) {
	c, g := group(t)
	s := &Stream{API: c, Group: g, Name: "i-1/agent"}
	fmt.Fprintf(s, "first\nsecond\nthi")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, c, g, "i-1/agent"); strings.Join(got, "|") != "first|second" {
		t.Fatalf("after the first flush: %q", got)
	}
	fmt.Fprintf(s, "rd\n")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, c, g, "i-1/agent"); strings.Join(got, "|") != "first|second|third" {
		t.Fatalf("after the second flush: %q", got)
	}
}

func TestBatchesKeepWithinPutLogEventsLimitsAndAFailedOneIsSentLater(t *testing.T) {
	c, g := group(t)
	api := &counting{API: c}
	s := &Stream{API: api, Group: g, Name: "i-2/agent"}
	for i := range 12_000 {
		fmt.Fprintf(s, "line %05d\n", i)
	}
	api.failNext.Store(true)
	if err := s.Flush(ctx); err == nil || !strings.Contains(err.Error(), "Throttling") {
		t.Fatalf("flush with a throttled put: %v", err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if api.puts.Load() != 2 || api.maxBatch.Load() > maxBatchEvents || api.events.Load() != 12_000 {
		t.Fatalf("%d puts, largest %d events, %d events in all; want 2 puts of at most %d, 12000 events, none twice", api.puts.Load(), api.maxBatch.Load(), api.events.Load(), maxBatchEvents)
	}
	got := lines(t, c, g, "i-2/agent")
	if len(got) != 12_000 || got[0] != "line 00000" || got[11_999] != "line 11999" {
		t.Fatalf("%d lines read back, first %q", len(got), got[0])
	}
}

func TestAStreamDeletedMeanwhileIsMadeAgain(t *testing.T) {
	c, g := group(t)
	s := &Stream{API: c, Group: g, Name: "i-3/agent"}
	fmt.Fprintln(s, "before")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteLogStream(ctx, &cloudwatchlogs.DeleteLogStreamInput{LogGroupName: aws.String(g), LogStreamName: aws.String("i-3/agent")}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(s, "after")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lines(t, c, g, "i-3/agent"); strings.Join(got, "|") != "after" {
		t.Fatalf("after the stream was deleted: %q", got)
	}
}

func TestAFullBufferDropsTheOldestLinesAndCountsThem(t *testing.T) {
	s := &Stream{Name: "i-4/agent"} // CloudWatch unreachable: nothing is flushed
	line := strings.Repeat("x", 1000)
	for range 5000 { // 5 MB of lines, over the 4 MiB buffer
		fmt.Fprintln(s, line)
	}
	if d := s.Dropped(); d < 800 || d > 1000 {
		t.Fatalf("%d lines dropped, want about 5000 - 4 MiB / 1026 B", d)
	}
	if s.size > maxBuffered {
		t.Fatalf("buffer holds %d bytes, over %d", s.size, maxBuffered)
	}
	long := strings.Repeat("y", 300*1024)
	fmt.Fprintln(s, long)
	if last := aws.ToString(s.events[len(s.events)-1].Message); len(last) >= maxEventBytes || !strings.HasSuffix(last, "(truncated)") {
		t.Fatalf("a 300 KiB line is queued as %d bytes", len(last))
	}
}

func TestTheUserDataOutputIsSentOnceAcrossAgentRestarts(t *testing.T) {
	c, g := group(t)
	dir := t.TempDir()
	path, offset := filepath.Join(dir, "cloud-init-output.log"), filepath.Join(dir, "offset")
	follow := func(wait func() bool) {
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			Follow(fctx, &Stream{API: c, Group: g, Name: "i-5/user-data"}, path, offset, 50*time.Millisecond)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for !wait() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		cancel()
		<-done
	}
	count := func(n int) func() bool {
		return func() bool {
			res, err := c.GetLogEvents(ctx, &cloudwatchlogs.GetLogEventsInput{LogGroupName: aws.String(g), LogStreamName: aws.String("i-5/user-data"), StartFromHead: aws.Bool(true)})
			return err == nil && len(res.Events) >= n // no stream yet until the first flush
		}
	}
	if err := os.WriteFile(path, []byte("boot 1\nboot 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	follow(count(2))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "agent started\npartial")
	f.Close()
	follow(count(3)) // a restarted agent: only what is new, whole lines only
	if got := lines(t, c, g, "i-5/user-data"); strings.Join(got, "|") != "boot 1|boot 2|agent started" {
		t.Fatalf("stream after a restart: %q", got)
	}
}

// stopDuring stops the agent (cancels its context) while a put is in flight
// and, like the SDK, answers the context's error if that reached the request.
type stopDuring struct {
	API
	stop func()
}

func (c *stopDuring) PutLogEvents(ctx context.Context, in *cloudwatchlogs.PutLogEventsInput, o ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error) {
	out, err := c.API.PutLogEvents(ctx, in, o...)
	c.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, err
}

func TestAnAgentStoppingDuringAPutNeitherRepeatsNorLosesTheBatch(t *testing.T) {
	c, g := group(t)
	dir := t.TempDir()
	path, offset := filepath.Join(dir, "cloud-init-output.log"), filepath.Join(dir, "offset")
	if err := os.WriteFile(path, []byte("boot 1\nboot 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	Follow(fctx, &Stream{API: &stopDuring{API: c, stop: cancel}, Group: g, Name: "i-6/user-data"}, path, offset, time.Hour)
	if got := readOffset(offset); got != int64(len("boot 1\nboot 2\n")) {
		t.Fatalf("offset after a stop during the put: %d (the batch landed, so a restart would send it again)", got)
	}
	again, stop := context.WithCancel(ctx)
	stop()
	Follow(again, &Stream{API: c, Group: g, Name: "i-6/user-data"}, path, offset, time.Hour)
	if got := lines(t, c, g, "i-6/user-data"); strings.Join(got, "|") != "boot 1|boot 2" {
		t.Fatalf("stream after a restart: %q", got)
	}
}

func TestLinesRejectedForTheirTimeAreCountedAndSaidOnce(t *testing.T) {
	c, g := group(t)
	var warnings []string
	// An instance clock three hours ahead: CloudWatch (moto too) accepts
	// events up to two hours after its own clock.
	s := &Stream{API: c, Group: g, Name: "i-7/agent", Now: func() time.Time { return time.Now().Add(3 * time.Hour) },
		Warn: func(lines int, why string) { warnings = append(warnings, fmt.Sprintf("%d: %s", lines, why)) }}
	for round := 0; round < 2; round++ {
		fmt.Fprintln(s, "from the future", round)
		if err := s.Flush(ctx); err != nil {
			t.Fatalf("a batch with rejected lines is not an error: %v", err)
		}
	}
	if s.Rejected() < 2 || len(warnings) != 1 || !strings.Contains(warnings[0], "clock is ahead") {
		t.Fatalf("rejected %d, warnings %q; want both lines counted and one warning naming the clock", s.Rejected(), warnings)
	}
	if got := lines(t, c, g, "i-7/agent"); len(got) != 0 {
		t.Fatalf("the stream holds %q", got)
	}
	// A clock in time again: its lines go through, and nothing more is said.
	s.Now = nil
	fmt.Fprintln(s, "on time")
	if err := s.Flush(ctx); err != nil || len(warnings) != 1 {
		t.Fatalf("flush %v, warnings %q", err, warnings)
	}
	if got := lines(t, c, g, "i-7/agent"); strings.Join(got, "|") != "on time" {
		t.Fatalf("the stream holds %q", got)
	}
}
