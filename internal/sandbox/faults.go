package sandbox

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"time"
)

// The faults the chaos suite injects at the front endpoint, and the handler
// that injects them on the way to moto (DynamoDB's are in dynamo.go, Logs'
// in logsfaults.go).

// Faults are what the chaos suite injects at the front endpoint, where every
// AWS call of the functions and agents passes.
type Faults struct {
	// AfterCreateFleet is called once a CreateFleet answer has gone back to
	// the function that asked: killing that invocation now leaves instances
	// running that no record describes yet.
	AfterCreateFleet func()
	// DuplicateMessage says whether an SQS SendMessage (a pool message) is
	// sent to moto a second time, and after how long: duplicated and
	// reordered pool messages.
	DuplicateMessage func() (bool, time.Duration)
	// ClockOffset shifts the clock of a new instance's agent.
	ClockOffset func(instanceID string) time.Duration
	// DynamoDB says, per DynamoDB request, whether it is throttled or
	// fails with a 500 (before or after moto applied it); see dynamo.go.
	DynamoDB func(DynamoRequest) DynamoAnswer
	// IndexLag says how old a view of a global secondary index a Query
	// naming an IndexName is answered from (0: the current one); see
	// indexlag.go.
	IndexLag func() time.Duration
	// Logs says, per CloudWatch Logs write of an agent (CreateLogStream,
	// PutLogEvents), whether it is throttled, fails or hangs; see
	// logsfaults.go.
	Logs func(op string) LogsAnswer
	// Note hears of faults the endpoint injected on its own account (an
	// index answer that differs from the current one), by name.
	Note func(fault string)
	// InvokeIdleReset, when set, resets the connection of a synchronous
	// Invoke that carried no byte for that long, as a NAT gateway drops an
	// idle connection; the invocation runs on (invokeidle.go).
	InvokeIdleReset time.Duration
	// StartRefused says whether EC2 refuses a StartInstances of ids for
	// want of capacity (InsufficientInstanceCapacity), as it may for a
	// stopped instance whose type has none left in its zone.
	StartRefused func(ids []string) bool
}

// SetFaults replaces the injected faults; the zero Faults injects none.
func (s *Sandbox) SetFaults(f Faults) {
	s.mu.Lock()
	s.faults = f
	s.mu.Unlock()
}

// withFaults passes AWS calls to moto and injects the configured faults.
func (s *Sandbox) withFaults(moto http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		f := s.faults
		s.mu.Unlock()
		target := r.Header.Get("X-Amz-Target")
		dynamo := strings.HasPrefix(target, dynamoTarget) && (f.DynamoDB != nil || f.IndexLag != nil)
		logs := f.Logs != nil && strings.HasPrefix(target, logsTarget) && faultedLogOps[strings.TrimPrefix(target, logsTarget)]
		if (f.AfterCreateFleet == nil && f.DuplicateMessage == nil && !dynamo && !logs) || r.Method != http.MethodPost {
			moto.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(w, r)
		if !ok {
			return
		}
		switch {
		case dynamo:
			s.serveDynamo(w, r, body, f, moto)
			return
		case logs:
			serveLogs(w, r, body, f, moto)
			return
		}
		moto.ServeHTTP(w, r)
		switch {
		case f.AfterCreateFleet != nil && bytes.Contains(body, []byte("Action=CreateFleet")):
			if fl, ok := w.(http.Flusher); ok {
				fl.Flush()
			}
			f.AfterCreateFleet()
		case f.DuplicateMessage != nil && r.Header.Get("X-Amz-Target") == "AmazonSQS.SendMessage":
			if again, after := f.DuplicateMessage(); again {
				go s.resend(r.Header.Clone(), body, after)
			}
		}
	})
}

// resend sends a copy of an AWS request to moto (which does not check
// signatures) after a while.
func (s *Sandbox) resend(h http.Header, body []byte, after time.Duration) {
	time.Sleep(after)
	req, err := http.NewRequest(http.MethodPost, s.Moto.URL+"/", bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header = h
	if resp, err := http.DefaultClient.Do(req); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
