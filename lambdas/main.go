// Command bootstrap is ghrunner's Lambda bundle for the provided.al2023
// runtime: one binary, the handler chosen by GHRUNNER_HANDLER (provision,
// release, refresh, scale-down or jit, the consumer of the agents'
// just-in-time requests). Configuration comes from the environment and
// from the pool items in the state table, so pool changes need no
// redeploy.
//
// Environment:
//
//	GHRUNNER_HANDLER           provision | release | refresh | scale-down | jit, or
//	                           listener: not a Lambda function but a long-lived process
//	                           (an ECS task) serving the pools' runner scale sets
//	GHRUNNER_LISTENER_NAME     the listener's name as its sessions' owner (default: the host name)
//	GHRUNNER_TABLE             the state table
//	GHRUNNER_ENVIRONMENT       the deployment's name (the ghr:environment tag)
//	GHRUNNER_GITHUB_PARAMETER  SSM SecureString holding the GitHub credentials as JSON:
//	                           {"appId":123,"privateKey":"-----BEGIN…"} or {"token":"…"}
//	                           (appId a number or a string of digits),
//	                           optionally with "baseUrl" for GitHub Enterprise Server
//	GHRUNNER_OIDC_ISSUER       the issuer of the invoking jobs' OIDC tokens (default
//	                           https://token.actions.githubusercontent.com; GHES:
//	                           https://HOSTNAME/_services/token)
//	GHRUNNER_OIDC_AUDIENCE     the audience those tokens must carry (default ghrunner)
//	GHRUNNER_LOG_LEVEL         debug | info (default) | warn | error
//	GHRUNNER_RUNNER_RELEASES_EVERY  how often refresh asks GitHub for
//	                           actions/runner's latest release (a Go
//	                           duration, default 1h)
//	AWS_ENDPOINT_URL[_<SVC>]   endpoint overrides (VPC endpoints, emulators)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // idle windows name IANA time zones

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/controlplane"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/fleet"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/github"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/idtoken"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/metrics"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/state"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/jitstream"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/provision"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/refresh"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/release"
	"github.com/ghrunner/terraform-provider-ghrunner/lambdas/scaledown"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
		fmt.Println("bootstrap: ghrunner's Lambda bundle; run by the Lambda runtime with GHRUNNER_HANDLER set to one of", strings.Join(bundle.Handlers, ", "))
		return
	}
	if os.Getenv("GHRUNNER_HANDLER") == bundle.HandlerListener {
		os.Exit(serveListener())
	}
	b := setup(context.Background())
	if b.setupErr != nil {
		// Not an exit at init: an environment that never starts writes no
		// metric, and the alarms, which read the functions' metrics, would
		// stay quiet. Each invocation fails with what to fix instead, and
		// counts as an error.
		b.log.Error("configuration error", "err", b.setupErr)
	}
	lambda.Start(b)
}

// Invoke makes the execution environment a lambda.Handler: the payload arrives as raw bytes,
// so even an empty or malformed payload reaches our decoder and its clear
// message, rather than a bare "EOF" from the runtime library.
func (b *execEnv) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := b.handle(ctx, payload)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// execEnv holds what lives across invocations of one execution environment.
type execEnv struct {
	handler string
	aws     awsconf.Config
	store   *state.Store
	fleet   *fleet.Fleet
	log     *slog.Logger
	ghParam string
	// metricsOut receives the EMF lines (stdout, as the logs).
	metricsOut io.Writer
	// environment is every metric's "environment" dimension: deployments
	// sharing an account and region keep their metrics apart.
	environment string
	ghOnce      sync.Mutex
	gh          *github.Client
	// idTokens verifies the invoking job's OIDC token; it caches the
	// issuer's keys for the life of the execution environment.
	idTokens *idtoken.Verifier
	// groups caches runner group ids (provision and the jit consumer
	// would page through the owner's groups for every runner).
	groups *controlplane.GroupIDs
	// releasesEvery is refresh's GHRUNNER_RUNNER_RELEASES_EVERY.
	releasesEvery time.Duration
	// setupErr is the configuration's fault: every invocation fails with
	// it (and writes its outcome).
	setupErr error
}

// groupIDsFor is how long a runner group's id is used without asking
// GitHub again: a group renamed or replaced is found again after it, or
// after the first mint that fails with it.
const groupIDsFor = 10 * time.Minute

// setup reads the configuration. The environment it returns always has a
// logger, its handler and environment: when the configuration is at fault
// (setupErr), each invocation still writes its outcome.
func setup(ctx context.Context) *execEnv {
	b := &execEnv{handler: os.Getenv("GHRUNNER_HANDLER"), environment: os.Getenv("GHRUNNER_ENVIRONMENT"), ghParam: os.Getenv("GHRUNNER_GITHUB_PARAMETER"),
		metricsOut: os.Stdout, groups: &controlplane.GroupIDs{TTL: groupIDsFor}}
	b.log = slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("handler", b.handler, "environment", b.environment)
	b.setupErr = b.configure(ctx)
	return b
}

func (b *execEnv) configure(ctx context.Context) error {
	if !slices.Contains(bundle.Handlers, b.handler) && b.handler != bundle.HandlerListener {
		return fmt.Errorf("GHRUNNER_HANDLER: %q must be one of %s", b.handler, strings.Join(bundle.Handlers, ", "))
	}
	table := os.Getenv("GHRUNNER_TABLE")
	if table == "" || b.environment == "" {
		return errors.New("GHRUNNER_TABLE and GHRUNNER_ENVIRONMENT: both are required")
	}
	if b.ghParam == "" {
		return errors.New("GHRUNNER_GITHUB_PARAMETER: required (the SSM SecureString parameter holding the GitHub credentials)")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(envOr("GHRUNNER_LOG_LEVEL", "info"))); err != nil {
		return fmt.Errorf("GHRUNNER_LOG_LEVEL: %w", err)
	}
	b.log = slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level})).With("handler", b.handler, "environment", b.environment)
	if b.handler == bundle.HandlerRefresh {
		every, err := time.ParseDuration(envOr("GHRUNNER_RUNNER_RELEASES_EVERY", refresh.DefaultReleasesEvery.String()))
		if err != nil || every <= 0 {
			return fmt.Errorf("GHRUNNER_RUNNER_RELEASES_EVERY: %q must be a positive Go duration such as 1h", os.Getenv("GHRUNNER_RUNNER_RELEASES_EVERY"))
		}
		b.releasesEvery = every
	}
	// The issuer is configuration, never taken from a token: its discovery
	// document alone says where the keys are.
	var err error
	if b.idTokens, err = idtoken.New(envOr("GHRUNNER_OIDC_ISSUER", idtoken.GitHubIssuer), envOr("GHRUNNER_OIDC_AUDIENCE", idtoken.DefaultAudience), idtoken.Options{}); err != nil {
		return fmt.Errorf("GHRUNNER_OIDC_ISSUER / GHRUNNER_OIDC_AUDIENCE: %w", err)
	}
	cfg, err := awsconf.Load(ctx, awsconf.FromEnv())
	if err != nil {
		return err
	}
	b.aws = cfg
	b.store = state.New(cfg.DynamoDB(), table)
	b.fleet = fleet.New(cfg.EC2(), b.environment)
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// github reads the credentials once per execution environment; the client
// then caches tokens across invocations.
func (b *execEnv) github(ctx context.Context) (*github.Client, error) {
	b.ghOnce.Lock()
	defer b.ghOnce.Unlock()
	if b.gh != nil {
		return b.gh, nil
	}
	out, err := b.aws.SSM().GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(b.ghParam), WithDecryption: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read GitHub credentials from SSM parameter %s: %w", b.ghParam, err)
	}
	cfg, err := github.ParseCredentials([]byte(aws.ToString(out.Parameter.Value)))
	if err != nil {
		return nil, fmt.Errorf("SSM parameter %s: %w", b.ghParam, err)
	}
	b.gh, err = github.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("SSM parameter %s: %w", b.ghParam, err)
	}
	return b.gh, nil
}

// handle runs one invocation and writes its outcome whatever happens: a
// configuration at fault or GitHub credentials that cannot be read (a key
// rotated or deleted, a wrong parameter) fail every invocation, and the
// alarms see that only in the metrics written here.
func (b *execEnv) handle(ctx context.Context, payload json.RawMessage) (any, error) {
	log := b.log
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		log = log.With("requestId", lc.AwsRequestID)
	}
	start := time.Now()
	recBefore, lostBefore := b.usageCounts()
	out, rate, err := b.run(ctx, log, payload)
	seconds := time.Since(start).Seconds()
	recs := invocationMetrics(b.handler, payload, out, err != nil, seconds, rate)
	if b.store != nil {
		recAfter, lostAfter := b.usageCounts()
		if lostAfter > lostBefore {
			_, _, why := b.store.UsageCounts()
			log.Warn("usage spans lost: the cost report undercounts them", "lost", lostAfter-lostBefore, "err", why)
		}
		recs = append(recs, usageMetrics(b.handler, recBefore, lostBefore, recAfter, lostAfter))
	}
	b.emit(log, recs)
	if last := lastRunOf(b.handler, out, err, seconds); last != nil && b.store != nil {
		// For the operator's status; a failed write costs only that.
		if perr := b.store.PutLastRun(context.WithoutCancel(ctx), *last); perr != nil {
			log.Warn("last run not recorded", "err", perr)
		}
	}
	if err != nil {
		log.Error("invocation failed", "err", err, "seconds", seconds, "githubRateRemaining", rate)
		return nil, err
	}
	log.Info("invocation done", "seconds", seconds, "githubRateRemaining", rate)
	return out, nil
}

// usageCounts are the usage ledger's spans the store recorded and lost so
// far (zeros without a store).
func (b *execEnv) usageCounts() (recorded, lost int64) {
	if b.store == nil {
		return 0, 0
	}
	recorded, lost, _ = b.store.UsageCounts()
	return recorded, lost
}

// run is the invocation's work: its output, GitHub's rate limit left (-1
// when no GitHub client could be made) and its error.
func (b *execEnv) run(ctx context.Context, log *slog.Logger, payload json.RawMessage) (any, int64, error) {
	if b.setupErr != nil {
		return nil, -1, b.setupErr
	}
	gh, err := b.github(ctx)
	if err != nil {
		return nil, -1, err
	}
	d := &controlplane.Deps{Store: b.store, SQS: b.aws.SQS(), GitHub: gh, Log: log, IDTokens: b.idTokens, Groups: b.groups}
	var out any
	switch b.handler {
	case bundle.HandlerProvision:
		quotas := provision.AWSQuotas{ServiceQuotas: b.aws.ServiceQuotas(), EC2: b.aws.EC2()}
		out, err = provision.Handle(ctx, provision.Deps{Deps: d, EC2: provision.FleetLauncher{Fleet: b.fleet}, Quotas: quotas}, payload)
	case bundle.HandlerRelease:
		out, err = release.Handle(ctx, release.Deps{Deps: d}, payload)
	case bundle.HandlerRefresh:
		launch := provision.Deps{Deps: d, EC2: provision.FleetLauncher{Fleet: b.fleet}}
		prewarm := func(ctx context.Context, p *state.PoolConfig, n int) ([]string, error) {
			return provision.Prewarm(ctx, launch, p, n)
		}
		out, err = refresh.Handle(ctx, refresh.Deps{Deps: d, EC2: refresh.FleetEC2{Fleet: b.fleet}, Prewarm: prewarm, Reruns: gh, ReleasesEvery: b.releasesEvery}, payload)
	case bundle.HandlerScaleDown:
		out, err = scaledown.Handle(ctx, scaledown.Deps{Deps: d, EC2: b.fleet}, payload)
	case bundle.HandlerJIT:
		out, err = jitstream.Handle(ctx, jitstream.Deps{Deps: d}, payload)
	}
	return out, gh.RateRemaining(), err
}

// emit writes the invocation's metrics to stdout as EMF lines, where
// CloudWatch Logs extracts them. A record that cannot be encoded is logged
// and dropped: metrics never fail an invocation.
func (b *execEnv) emit(log *slog.Logger, recs []metrics.Record) {
	now := time.Now()
	for _, r := range recs {
		r.Dimensions["environment"] = b.environment
		line, err := r.Encode(now)
		if err != nil {
			log.Warn("metric dropped", "err", err)
			continue
		}
		b.metricsOut.Write(line)
	}
}
