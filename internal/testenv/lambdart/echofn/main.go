// Command echofn is a test function for lambdart: echoes its input, or fails, sleeps or crashes
// as the input asks.
package main

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type in struct {
	Say     string `json:"say"`
	Fail    string `json:"fail"`
	SleepMS int    `json:"sleepMs"`
	Crash   bool   `json:"crash"`
}

type out struct {
	Said      string `json:"said"`
	RequestID string `json:"requestId"`
	PID       int    `json:"pid"`
	Env       string `json:"env"`
	Deadline  bool   `json:"deadline"`
}

func main() {
	if os.Getenv("FAIL_INIT") != "" {
		os.Exit(2) // before the runtime API is asked for anything
	}
	lambda.Start(func(ctx context.Context, e in) (out, error) {
		if e.Crash {
			os.Exit(3)
		}
		time.Sleep(time.Duration(e.SleepMS) * time.Millisecond)
		if e.Fail != "" {
			return out{}, errors.New(e.Fail)
		}
		lc, _ := lambdacontext.FromContext(ctx)
		_, hasDeadline := ctx.Deadline()
		return out{Said: e.Say, RequestID: lc.AwsRequestID, PID: os.Getpid(), Env: os.Getenv("GREETING"), Deadline: hasDeadline}, nil
	})
}
