package sandbox

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// Lambda's concurrency as it throttles invocations (Lambda Developer Guide,
// "Lambda function scaling" and "Configuring reserved concurrency"; the
// Invoke API reference): an account has a number of concurrent executions
// per region (1,000 by default; new accounts are often given far fewer). A
// function with reserved concurrency N runs at most N at once, and the
// reserved amounts are taken out of what every other function shares. A
// synchronous Invoke beyond either is refused before the function runs:
// HTTP 429 TooManyRequestsException, its Reason
// ReservedFunctionConcurrentInvocationLimitExceeded or
// ConcurrentInvocationLimitExceeded (the ThrottleReason enum of the SDK
// model). Asynchronous invocations and event source mappings are not
// refused: Lambda keeps the event and retries it, which the sandbox plays
// by waiting for a free slot.
//
// Not modelled: the per-function scaling rate (1,000 new executions every
// 10 s) and invocation rate limits, which our few functions never reach.
// The sum of reserved concurrency is over the functions invoked so far,
// not every function of the account.

// DefaultLambdaConcurrency is the account's concurrent executions when
// Options.LambdaConcurrency is 0: Lambda's documented default.
const DefaultLambdaConcurrency = 1000

// NewAccountLambdaConcurrency is what make sandbox and the e2e suite give
// the account: "new accounts have reduced concurrency" says the Lambda
// Developer Guide (Lambda quotas) without a number; 10 is what users of
// new accounts report seeing. Our functions must work there.
const NewAccountLambdaConcurrency = 10

// errThrottled maps to Lambda's 429; reason is its ThrottleReason.
type errThrottled struct{ reason, msg string }

func (e *errThrottled) Error() string { return e.msg }

// concurrency counts the executions running per function.
type concurrency struct {
	limit int

	mu       sync.Mutex
	freed    *sync.Cond
	running  map[string]int
	reserved map[string]int // functions with reserved concurrency, as last read
	refused  int            // synchronous invocations answered 429
}

func newConcurrency(limit int) *concurrency {
	if limit <= 0 {
		limit = DefaultLambdaConcurrency
	}
	c := &concurrency{limit: limit, running: map[string]int{}, reserved: map[string]int{}}
	c.freed = sync.NewCond(&c.mu)
	return c
}

// acquire takes an execution slot for name: refused with *errThrottled when
// none is free and wait is false (a synchronous Invoke), waited for
// otherwise (an event Lambda holds and retries). reserved is the function's
// reserved concurrency (-1: none). The returned func frees it.
func (c *concurrency) acquire(ctx context.Context, name string, reserved int, wait bool) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reserved >= 0 {
		c.reserved[name] = reserved
	} else {
		delete(c.reserved, name)
	}
	stop := context.AfterFunc(ctx, func() { c.mu.Lock(); c.freed.Broadcast(); c.mu.Unlock() })
	defer stop()
	for {
		throttled := c.refusal(name)
		if throttled == nil {
			break
		}
		if !wait {
			c.refused++
			return nil, throttled
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.freed.Wait()
	}
	c.running[name]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.running[name]--
			c.freed.Broadcast()
			c.mu.Unlock()
		})
	}, nil
}

// refusal says why one more execution of name would be throttled (nil:
// it would not). Called with mu held.
func (c *concurrency) refusal(name string) *errThrottled {
	if r, ok := c.reserved[name]; ok {
		if c.running[name] >= r {
			return &errThrottled{"ReservedFunctionConcurrentInvocationLimitExceeded",
				fmt.Sprintf("Rate Exceeded. (function %s runs its reserved concurrency, %d, already)", name, r)}
		}
		return nil
	}
	unreserved, shared := c.limit, 0
	for _, r := range c.reserved {
		unreserved -= r
	}
	for fn, n := range c.running {
		if _, ok := c.reserved[fn]; !ok {
			shared += n
		}
	}
	if shared >= unreserved {
		return &errThrottled{"ConcurrentInvocationLimitExceeded",
			fmt.Sprintf("Rate Exceeded. (the account's unreserved concurrency, %d, is in use)", unreserved)}
	}
	return nil
}

// reservedOf is a function's reserved concurrency as GetFunction reports
// it (-1: none).
func reservedOf(out *lambda.GetFunctionOutput) int {
	if out.Concurrency == nil || out.Concurrency.ReservedConcurrentExecutions == nil {
		return -1
	}
	return int(aws.ToInt32(out.Concurrency.ReservedConcurrentExecutions))
}

// Throttles is how many synchronous invocations Lambda's concurrency
// refused with a 429 so far (the callers sent them again).
func (s *Sandbox) Throttles() int {
	s.functions.conc.mu.Lock()
	defer s.functions.conc.mu.Unlock()
	return s.functions.conc.refused
}

// inUse is how many executions run now, for tests and the story.
func (c *concurrency) inUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.running {
		n += r
	}
	return n
}

// ThrottleRetry sends a synchronous invocation again while Lambda answers
// 429, as the workflow's invoke.sh does (2 s, doubling to 30 s, for up to
// 300 s): what a workflow sees of a throttle is a later start.
func ThrottleRetry(ctx context.Context, call func() error) error {
	delay, waited := 2*time.Second, time.Duration(0)
	for {
		err := call()
		var tm interface{ ErrorCode() string }
		if err == nil || !errors.As(err, &tm) || tm.ErrorCode() != "TooManyRequestsException" || waited >= 300*time.Second {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		waited += delay
		delay = min(2*delay, 30*time.Second)
	}
}
