package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/actions/scaleset"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/listener"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
)

// poolsEvery is how often the listener reads the pools again: a pool that
// gains a scale set is served, one that loses it is left, with no restart.
const poolsEvery = 30 * time.Second

// serveListener runs the bundle as the scale-set listener (GHRUNNER_HANDLER
// listener): a long-lived process, not a Lambda function, stopped by
// SIGTERM as ECS stops a task. Its exit status is 1 when the configuration
// is at fault, so that ECS shows the task failing and starts it again.
func serveListener() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	b := setup(ctx)
	if b.setupErr != nil {
		b.log.Error("configuration error", "err", b.setupErr)
		return 1
	}
	gh, err := b.github(ctx)
	if err != nil {
		b.log.Error("GitHub credentials", "err", err)
		return 1
	}
	app, err := gh.App()
	if err != nil {
		b.log.Error("GitHub credentials", "err", err)
		return 1
	}
	name := os.Getenv("GHRUNNER_LISTENER_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	cfg := listener.Config{Name: name, Log: b.log, GitHub: gh, Status: b.store, Metrics: b.metricsOut, Environment: b.environment, Usage: listener.NewUsageSpans(b.store), NewDeps: func(g controlplane.GitHub) provision.Deps {
		d := &controlplane.Deps{Store: b.store, SQS: b.aws.SQS(), GitHub: g, Log: b.log, Groups: b.groups}
		return provision.Deps{Deps: d, EC2: provision.FleetLauncher{Fleet: b.fleet}}
	}}
	b.log.Info("listener started", "name", name)
	serving := map[string]context.CancelFunc{}
	var wg sync.WaitGroup
	for {
		pools, err := b.store.ListPoolConfigs(ctx)
		if err != nil {
			b.log.Warn("pools not read", "err", err)
		}
		seen := map[string]bool{}
		for i := range pools {
			p := pools[i]
			if p.ScaleSet == nil || err != nil {
				continue
			}
			key := p.Name + "/" + p.ScaleSet.Name
			seen[key] = true
			if serving[key] != nil {
				continue
			}
			api, aerr := scaleSetClient(ctx, gh, app, p.Owner, b.log)
			if aerr != nil {
				b.log.Error("scale set client", "pool", p.Name, "err", aerr)
				continue
			}
			pctx, cancel := context.WithCancel(ctx)
			serving[key] = cancel
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = listener.ServePool(pctx, cfg, api, &p)
			}()
		}
		for key, cancel := range serving {
			if !seen[key] && err == nil {
				cancel()
				delete(serving, key)
			}
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			b.log.Info("listener stopped")
			return 0
		case <-time.After(poolsEvery):
		}
	}
}

// scaleSetClient is the runner scale set client of owner's installation.
func scaleSetClient(ctx context.Context, gh *github.Client, app github.App, owner string, log *slog.Logger) (*scaleset.Client, error) {
	inst, err := gh.InstallationID(ctx, owner)
	if err != nil {
		return nil, err
	}
	c, err := scaleset.NewClientWithGitHubApp(scaleset.ClientWithGitHubAppConfig{
		GitHubConfigURL: gh.RunnerURL(owner),
		GitHubAppAuth:   scaleset.GitHubAppAuth{ClientID: fmt.Sprint(app.ID), InstallationID: inst, PrivateKey: string(app.PrivateKeyPEM)},
		SystemInfo:      scaleset.SystemInfo{System: "ghrunner", Subsystem: "listener"},
	}, scaleset.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("scale set client of %s: %w", owner, err)
	}
	return c, nil
}
