package lifecycle

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// permanent marks an error retry must not repeat.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// retry calls f up to attempts times with exponential backoff and jitter.
func retry(ctx context.Context, attempts int, f func() error) error {
	var err error
	for i := 1; i <= attempts; i++ {
		if err = f(); err == nil {
			return nil
		}
		var p permanent
		if errors.As(err, &p) || i == attempts || !sleep(ctx, backoff(i)) {
			break
		}
	}
	return err
}

// backoff is 200 ms doubling per attempt up to 30 s, with ±50 % jitter so a
// fleet of agents does not retry in step.
func backoff(attempt int) time.Duration {
	d := 200 * time.Millisecond << min(attempt-1, 8)
	d = min(d, 30*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d)))
}

func sleep(ctx context.Context, d time.Duration) bool { return sleepOrWake(ctx, d, nil) }

// sleepOrWake is sleep that also ends when wake is ready.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-wake:
	}
	return true
}
