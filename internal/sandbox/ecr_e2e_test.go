// ECR in the sandbox, without terraform: the real AWS SDK and
// go-containerregistry against the front endpoint, as the provider's
// ghrunner_listener resource pushes the listener's image.
package sandbox_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/awsconf"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/image"
	"github.com/ghrunner/terraform-provider-ghrunner/internal/sandbox"
)

// bare starts a sandbox of its own, nothing deployed, and a configuration
// that talks to its front endpoint as the deployer.
func bare(t *testing.T) (*sandbox.Sandbox, awsconf.Config) {
	t.Helper()
	ctx := context.Background()
	logs, err := os.Create(filepath.Join(t.TempDir(), "sandbox.log"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.Start(ctx, sandbox.Options{Dir: t.TempDir(), Repo: repo, Logs: logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range sb.Denials() {
			t.Errorf("IAM denied a request: %s", d)
		}
		sb.Stop()
		if t.Failed() {
			raw, _ := os.ReadFile(logs.Name())
			t.Logf("sandbox log (last 6 KB):\n%s", tail(string(raw), 6144))
		}
	})
	cfg, err := awsconf.Load(ctx, awsconf.Options{Region: sandbox.Region, Endpoint: sb.URL, AccessKeyID: "e2e", SecretAccessKey: "e2e", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	return sb, cfg
}

func ecrClient(cfg awsconf.Config) *ecr.Client {
	return ecr.NewFromConfig(cfg.AWS, func(o *ecr.Options) { o.BaseEndpoint = cfg.Endpoint("ecr") })
}

func TestAPushToTheSandboxsECRNeedsECRsLoginAndARepositoryECRHas(t *testing.T) {
	t.Parallel()
	sb, cfg := bare(t)
	ctx := context.Background()
	api := ecrClient(cfg)
	repo, err := api.CreateRepository(ctx, &ecr.CreateRepositoryInput{RepositoryName: aws.String("ghrunner/listener")})
	if err != nil {
		t.Fatal(err)
	}
	uri := aws.ToString(repo.Repository.RepositoryUri)
	if want := sb.RegistryHost() + "/ghrunner/listener"; uri != want {
		t.Fatalf("repositoryUri = %q, want %q (ECR's shape, the sandbox's registry host)", uri, want)
	}
	described, err := api.DescribeRepositories(ctx, &ecr.DescribeRepositoriesInput{RepositoryNames: []string{"ghrunner/listener"}})
	if err != nil || aws.ToString(described.Repositories[0].RepositoryUri) != uri {
		t.Fatalf("DescribeRepositories: %v, want the same URI %s", err, uri)
	}
	img, err := image.Build([]byte("#!/bin/true\n"), runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}

	// No login: ECR's registry answers 401 with a Basic challenge.
	_, err = image.Push(ctx, img, uri+":v1", authn.Anonymous)
	if status(err) != http.StatusUnauthorized {
		t.Fatalf("push without a login: %v, want 401", err)
	}
	resp, err := http.Get("http://" + sb.RegistryHost() + "/v2/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic ") {
		t.Fatalf("GET /v2/ without a login: %d %q, want 401 with a Basic challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// A made-up password is no login either.
	if _, err = image.Push(ctx, img, uri+":v1", &authn.Basic{Username: "AWS", Password: "guessed"}); status(err) != http.StatusUnauthorized {
		t.Fatalf("push with a password ECR did not give: %v, want 401", err)
	}

	// ECR's login: GetAuthorizationToken, whose proxyEndpoint is the
	// registry; go-containerregistry speaks plain http to it (loopback).
	auth, host, err := image.ECRAuth(ctx, api)
	if err != nil {
		t.Fatal(err)
	}
	if host != sb.RegistryHost() {
		t.Fatalf("proxyEndpoint's host = %q, want %q", host, sb.RegistryHost())
	}
	ref, err := image.Push(ctx, img, uri+":v1", auth)
	if err != nil {
		t.Fatalf("push with ECR's login: %v", err)
	}
	digest, _ := img.Digest()
	if want := uri + "@" + digest.String(); ref != want {
		t.Fatalf("pushed %s, want %s", ref, want)
	}

	// ECR lists the image pushed, by the registry's digest and its tag.
	images, err := api.DescribeImages(ctx, &ecr.DescribeImagesInput{RepositoryName: aws.String("ghrunner/listener")})
	if err != nil || len(images.ImageDetails) != 1 || aws.ToString(images.ImageDetails[0].ImageDigest) != digest.String() ||
		!slices.Equal(images.ImageDetails[0].ImageTags, []string{"v1"}) {
		t.Fatalf("DescribeImages: %+v %v, want %s tagged v1", images, err, digest)
	}

	// A repository ECR does not have: 404 NAME_UNKNOWN, login or not.
	_, err = image.Push(ctx, img, sb.RegistryHost()+"/nobody/here:v1", auth)
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != http.StatusNotFound || len(terr.Errors) == 0 || terr.Errors[0].Code != transport.NameUnknownErrorCode {
		t.Fatalf("push to a repository ECR lacks: %v, want 404 NAME_UNKNOWN", err)
	}

	// With the login check off, the same anonymous push succeeds: the 401
	// above came from the check and from nothing else.
	sb.SetRegistryLogin(false)
	if _, err := image.Push(ctx, img, uri+":anonymous", authn.Anonymous); err != nil {
		t.Fatalf("anonymous push with the check off: %v", err)
	}
}

func status(err error) int {
	var terr *transport.Error
	if errors.As(err, &terr) {
		return terr.StatusCode
	}
	return 0
}
