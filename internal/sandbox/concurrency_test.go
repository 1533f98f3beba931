package sandbox

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf/admin"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/awstest"
)

// Past the account's concurrency a synchronous invocation is refused with
// Lambda's 429 before it runs, a function with reserved concurrency is held
// to it (and its reservation is out of what the others share), and an
// event Lambda holds waits for a slot instead of failing.
func TestLambdaThrottlesSynchronousInvocationsPastTheConcurrencyLimit(t *testing.T) {
	moto, err := awstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer moto.Stop()
	cfg := moto.Config(t)
	client := admin.Lambda(cfg)
	ctx := context.Background()
	createFunction(t, cfg, "shared")
	createFunction(t, cfg, "reserved")
	if _, err := client.PutFunctionConcurrency(ctx, &lambda.PutFunctionConcurrencyInput{FunctionName: aws.String("reserved"), ReservedConcurrentExecutions: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}

	reserved := func(name string) int {
		out, err := client.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return reservedOf(out)
	}
	if r, s := reserved("reserved"), reserved("shared"); r != 1 || s != -1 {
		t.Fatalf("GetFunction reports reserved concurrency %d and %d, want 1 and none", r, s)
	}
	c := newConcurrency(3)
	free1, err := c.acquire(ctx, "reserved", 1, false)
	if err != nil {
		t.Fatalf("the reserved function's first execution: %v", err)
	}
	var th *errThrottled
	if _, err := c.acquire(ctx, "reserved", 1, false); !errors.As(err, &th) || th.reason != "ReservedFunctionConcurrentInvocationLimitExceeded" {
		t.Fatalf("a second execution past a reservation of 1 = %v, want ReservedFunctionConcurrentInvocationLimitExceeded", err)
	}
	// 3 in the account, 1 reserved: 2 shared.
	a, err := c.acquire(ctx, "shared", -1, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.acquire(ctx, "shared", -1, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.acquire(ctx, "shared", -1, false); !errors.As(err, &th) || th.reason != "ConcurrentInvocationLimitExceeded" {
		t.Fatalf("a third shared execution with 2 unreserved = %v, want ConcurrentInvocationLimitExceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		free, err := c.acquire(ctx, "shared", -1, true)
		if err == nil {
			free()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a queued event ran while no slot was free (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	a()
	if err := <-got; err != nil {
		t.Fatalf("the queued event, once a slot was free: %v", err)
	}
	b()
	free1()
	if n := c.inUse(); n != 0 {
		t.Errorf("%d executions still counted after all ended", n)
	}
}

// The refusal reaches callers as Lambda's: HTTP 429, TooManyRequestsException
// with its Reason, which the SDK decodes (and its retryer treats as a
// throttle).
func TestAThrottledInvokeIsLambdasTooManyRequestsException(t *testing.T) {
	s := &Sandbox{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.invokeFailed(w, &errThrottled{"ConcurrentInvocationLimitExceeded", "Rate Exceeded."})
	}))
	defer srv.Close()
	cfg, err := awsconf.Load(context.Background(), awsconf.Options{Region: Region, Endpoint: srv.URL, AccessKeyID: "x", SecretAccessKey: "x", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.Lambda(cfg).Invoke(context.Background(), &lambda.InvokeInput{FunctionName: aws.String("f")})
	var tm *lambdatypes.TooManyRequestsException
	if !errors.As(err, &tm) || tm.Reason != lambdatypes.ThrottleReasonConcurrentInvocationLimitExceeded {
		t.Fatalf("invoke = %v, want TooManyRequestsException with Reason ConcurrentInvocationLimitExceeded", err)
	}
	calls := 0
	err = ThrottleRetry(context.Background(), func() error { calls++; return nil })
	if err != nil || calls != 1 {
		t.Errorf("ThrottleRetry of a call that succeeds: %v after %d calls", err, calls)
	}
}

func createFunction(t *testing.T, cfg awsconf.Config, name string) {
	t.Helper()
	ctx := context.Background()
	role, err := admin.IAM(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name + "-role"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("bootstrap")
	w.Write([]byte("#!/bin/sh\n"))
	zw.Close()
	if _, err := admin.Lambda(cfg).CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name), Role: role.Role.Arn,
		Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"), Code: &lambdatypes.FunctionCode{ZipFile: buf.Bytes()}}); err != nil {
		t.Fatal(err)
	}
}
