// Command ecstask is the program of the ECS tests' image: it writes what it
// was started with (its environment, the credentials the SDK's default
// chain finds, the answer of one call made with them) to
// $ECSTASK_OUT/<pid>.json, notes "start" and, on SIGTERM, "term" lines in
// $ECSTASK_OUT/events, then sleeps until it is stopped. With
// ECSTASK_IGNORE_TERM=1 it notes SIGTERM but does not exit.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

func main() {
	out := os.Getenv("ECSTASK_OUT")
	mark := os.Getenv("ECSTASK_MARK")
	note(out, "start", mark)
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)

	host, _ := os.Hostname()
	report := map[string]any{"pid": os.Getpid(), "args": os.Args, "hostname": host}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	report["env"] = env
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	cfg, err := config.LoadDefaultConfig(ctx)
	if err == nil {
		var c aws.Credentials
		if c, err = cfg.Credentials.Retrieve(ctx); err == nil {
			report["accessKeyId"], report["source"] = c.AccessKeyID, c.Source
		}
	}
	if err != nil {
		report["credentialsError"] = err.Error()
	} else if p := os.Getenv("ECSTASK_PARAMETER"); p != "" {
		got, err := ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(p)})
		if err != nil {
			report["parameterError"] = err.Error()
		} else {
			report["parameter"] = aws.ToString(got.Parameter.Value)
		}
	}
	cancel()
	raw, _ := json.Marshal(report)
	tmp := filepath.Join(out, fmt.Sprintf(".%d.json", os.Getpid()))
	os.WriteFile(tmp, raw, 0o644)
	os.Rename(tmp, filepath.Join(out, fmt.Sprintf("%d.json", os.Getpid())))
	fmt.Println("ecstask: started", mark)

	for range terms {
		note(out, "term", mark)
		if os.Getenv("ECSTASK_IGNORE_TERM") != "1" {
			fmt.Println("ecstask: stopping", mark)
			os.Exit(0)
		}
	}
}

// note appends "<what> <pid> <mark>" to the events file.
func note(out, what, mark string) {
	f, err := os.OpenFile(filepath.Join(out, "events"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %d %s\n", what, os.Getpid(), mark)
	f.Close()
}
