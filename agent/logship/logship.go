// Package logship sends an instance's logs to its pool's CloudWatch Logs
// group: the agent's own log lines (Writer, teed from its JSON log) and the
// user data's output (Follow, a file the agent reads as it grows). Each goes
// to a stream of its own, named after the instance.
//
// Invariants:
//   - shipping never blocks or fails the agent: a full buffer drops the
//     oldest lines and counts them, an error keeps the batch for the next
//     flush (lines CloudWatch rejects for their time are counted and said
//     once, not retried: they would be rejected again), and a line is
//     sent twice only when a request timed out after
//     CloudWatch took it (PutLogEvents is not idempotent): a request in
//     flight is never abandoned because the agent is stopping;
//   - a batch obeys PutLogEvents' limits (events in time order, at most
//     10,000 events and 1 MiB counting 26 bytes per event; one event at
//     most 256 KiB, longer lines are cut);
//   - the followed file's offset is kept on disk once all it read is sent,
//     so an agent restart does not send the user data's output again.
package logship

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
)

// Limits of PutLogEvents (CloudWatch Logs API reference).
const (
	maxBatchBytes  = 1_048_576
	eventOverhead  = 26
	maxBatchEvents = 10_000
	maxEventBytes  = 256 * 1024
	// maxBuffered bounds what waits for a flush while CloudWatch is
	// unreachable or throttles: beyond it the oldest lines go.
	maxBuffered = 4 << 20
	// requestLimit bounds one CreateLogStream or PutLogEvents call.
	requestLimit = 10 * time.Second
)

// API is the part of CloudWatch Logs the shipper calls.
type API interface {
	CreateLogStream(context.Context, *cloudwatchlogs.CreateLogStreamInput, ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.CreateLogStreamOutput, error)
	PutLogEvents(context.Context, *cloudwatchlogs.PutLogEventsInput, ...func(*cloudwatchlogs.Options)) (*cloudwatchlogs.PutLogEventsOutput, error)
}

// Stream is one log stream's buffer. Write takes whole or partial lines;
// Flush sends what is complete.
type Stream struct {
	API   API
	Group string
	Name  string
	Now   func() time.Time
	// Warn hears, once per stream, that CloudWatch took a batch but
	// rejected lines of it for their time (a clock hours off): they are
	// lost, and nothing else would say so.
	Warn func(lines int, why string)

	mu       sync.Mutex
	partial  []byte
	events   []types.InputLogEvent
	size     int
	dropped  int
	rejected int
	warned   bool
	created  bool
}

// Write buffers the complete lines of p (the rest waits for its newline)
// and never fails: it is teed from the agent's log.
func (s *Stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	data := append(s.partial, p...)
	now := s.now().UnixMilli()
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		s.add(string(data[:i]), now)
		data = data[i+1:]
	}
	s.partial = append([]byte(nil), data...)
	return len(p), nil
}

func (s *Stream) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// add queues one line (mu held).
func (s *Stream) add(line string, at int64) {
	if line == "" {
		return
	}
	if len(line) > maxEventBytes-eventOverhead {
		line = line[:maxEventBytes-eventOverhead-16] + " …(truncated)"
	}
	s.events = append(s.events, types.InputLogEvent{Message: aws.String(line), Timestamp: aws.Int64(at)})
	s.size += len(line) + eventOverhead
	for s.size > maxBuffered && len(s.events) > 1 {
		s.size -= len(aws.ToString(s.events[0].Message)) + eventOverhead
		s.events = s.events[1:]
		s.dropped++
	}
}

// Dropped is how many lines were dropped because the buffer was full.
func (s *Stream) Dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// Flush sends the buffered lines, batch by batch. A batch that fails stays
// buffered for the next flush.
func (s *Stream) Flush(ctx context.Context) error {
	for {
		s.mu.Lock()
		batch, bytes := s.batch()
		s.mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		if err := s.put(ctx, batch); err != nil {
			return err
		}
		s.mu.Lock()
		s.events = s.events[len(batch):]
		s.size -= bytes
		s.mu.Unlock()
	}
}

// batch is the longest prefix of the buffer PutLogEvents takes (mu held).
func (s *Stream) batch() ([]types.InputLogEvent, int) {
	n, bytes := 0, 0
	for n < len(s.events) && n < maxBatchEvents {
		b := len(aws.ToString(s.events[n].Message)) + eventOverhead
		if bytes+b > maxBatchBytes {
			break
		}
		bytes += b
		n++
	}
	return s.events[:n], bytes
}

func (s *Stream) put(ctx context.Context, batch []types.InputLogEvent) error {
	ctx, cancel := requestContext(ctx)
	defer cancel()
	events := append([]types.InputLogEvent(nil), batch...)
	// Lines are added in time order, but a clock stepped back (NTP) must
	// not make the batch invalid.
	sort.SliceStable(events, func(i, j int) bool { return aws.ToInt64(events[i].Timestamp) < aws.ToInt64(events[j].Timestamp) })
	for attempt := 0; attempt < 2; attempt++ {
		if !s.created {
			_, err := s.API.CreateLogStream(ctx, &cloudwatchlogs.CreateLogStreamInput{LogGroupName: aws.String(s.Group), LogStreamName: aws.String(s.Name)})
			var exists *types.ResourceAlreadyExistsException
			if err != nil && !errors.As(err, &exists) {
				return fmt.Errorf("create log stream %s: %w", s.Name, err)
			}
			s.created = true
		}
		out, err := s.API.PutLogEvents(ctx, &cloudwatchlogs.PutLogEventsInput{LogGroupName: aws.String(s.Group), LogStreamName: aws.String(s.Name), LogEvents: events})
		var gone *types.ResourceNotFoundException
		if errors.As(err, &gone) {
			s.created = false // the stream was deleted: make it again
			continue
		}
		if err != nil {
			return fmt.Errorf("put %d log events to %s: %w", len(events), s.Name, err)
		}
		s.noteRejected(out.RejectedLogEventsInfo, len(events))
		return nil
	}
	return fmt.Errorf("put log events to %s: the stream keeps disappearing", s.Name)
}

// requestContext keeps a request going when ctx is cancelled (the agent
// stopping): a batch CloudWatch took but whose answer was cut off would stay
// buffered, or its offset unsaved, and be sent again. Only a deadline (ctx's,
// or requestLimit) ends it.
func requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	limit := time.Now().Add(requestLimit)
	if d, ok := ctx.Deadline(); ok && d.Before(limit) {
		limit = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), limit)
}

// noteRejected counts the lines of a batch CloudWatch took but rejected for
// their time (PutLogEvents accepts events from 14 days, or the group's
// retention, before now to 2 hours after) and tells Warn the first time.
func (s *Stream) noteRejected(info *types.RejectedLogEventsInfo, n int) {
	if info == nil {
		return
	}
	lines, why := 0, ""
	if i := info.TooNewLogEventStartIndex; i != nil {
		lines += n - int(*i)
		why = "more than 2 hours after CloudWatch's clock: this instance's clock is ahead"
	}
	old := max(aws.ToInt32(info.TooOldLogEventEndIndex), aws.ToInt32(info.ExpiredLogEventEndIndex))
	if info.TooOldLogEventEndIndex != nil || info.ExpiredLogEventEndIndex != nil {
		lines += int(old) + 1
		why = "older than 14 days or the group's retention: this instance's clock is behind"
	}
	if lines <= 0 {
		return
	}
	s.mu.Lock()
	s.rejected += lines
	first := !s.warned
	s.warned = true
	s.mu.Unlock()
	if first && s.Warn != nil {
		s.Warn(lines, why)
	}
}

// Rejected is how many lines CloudWatch rejected for their time.
func (s *Stream) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejected
}

// Run flushes every interval until ctx ends, then once more with a short
// deadline of its own (the agent's last lines, at shutdown).
func (s *Stream) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			s.Flush(final)
			cancel()
			return
		case <-t.C:
			s.Flush(ctx)
		}
	}
}

// Follow ships the lines appended to path (the user data's output) to s,
// from the offset kept in offsetFile, polling every interval until ctx
// ends. A missing file is waited for.
func Follow(ctx context.Context, s *Stream, path, offsetFile string, every time.Duration) {
	sent := readOffset(offsetFile) // the offset of the bytes buffered so far
	buf := make([]byte, 64*1024)
	for {
		if f, err := os.Open(path); err == nil {
			if st, err := f.Stat(); err == nil && st.Size() < sent {
				sent = 0 // the file was replaced or truncated
			}
			for {
				n, err := f.ReadAt(buf, sent)
				if n > 0 {
					// Only whole lines count as sent: keep the offset at the
					// last newline.
					chunk := buf[:n]
					if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
						s.Write(chunk[:i+1])
						sent += int64(i + 1)
					} else if n == len(buf) {
						s.Write(append(chunk, '\n'))
						sent += int64(n)
					}
				}
				if err != nil || n < len(buf) {
					break
				}
			}
			f.Close()
		}
		if s.Flush(ctx) == nil {
			writeOffset(offsetFile, sent) // everything up to sent is in CloudWatch
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

func readOffset(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func writeOffset(path string, n int64) {
	tmp := path + ".tmp"
	if os.WriteFile(tmp, []byte(strconv.FormatInt(n, 10)), 0o600) == nil {
		os.Rename(tmp, path)
	}
}
