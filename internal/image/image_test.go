package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	ecrtypes "github.com/aws/aws-sdk-go-v2/service/ecr/types"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func TestTheSameBinaryMakesTheSameImage(t *testing.T) {
	a, err := Build([]byte("binary-1"), "arm64")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Build([]byte("binary-1"), "arm64")
	c, _ := Build([]byte("binary-2"), "arm64")
	d, _ := Build([]byte("binary-1"), "amd64")
	da, _ := a.Digest()
	db, _ := b.Digest()
	dc, _ := c.Digest()
	dd, _ := d.Digest()
	if da != db {
		t.Errorf("two builds of one binary: %s and %s, want one digest (an apply that changes nothing must push nothing)", da, db)
	}
	if da == dc || da == dd {
		t.Errorf("another binary or architecture kept the digest %s", da)
	}
}

func TestBuildRefusesWhatCannotRun(t *testing.T) {
	if _, err := Build([]byte("x"), "386"); err == nil || !bytes.Contains([]byte(err.Error()), []byte("architecture")) {
		t.Errorf("386: %v, want an error naming architecture", err)
	}
	if _, err := Build(nil, "arm64"); err == nil {
		t.Error("an empty binary was accepted")
	}
}

// TestAPushedImageRunsTheBinaryAsTheListener pushes to a registry (the
// registry API as go-containerregistry serves it) and reads the image back
// as a runtime would: its config says linux/<arch>, a user that is not
// root, the entrypoint, the listener's handler; its one layer holds the
// very binary, executable.
func TestAPushedImageRunsTheBinaryAsTheListener(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := mustHost(t, srv.URL)
	img, err := Build([]byte("#!/bin/sh\necho listener\n"), "amd64")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Push(context.Background(), img, host+"/ghrunner/listener:v1", authn.Anonymous, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	if ref != host+"/ghrunner/listener@"+want.String() {
		t.Errorf("Push = %s, want the reference by digest %s", ref, want)
	}
	pulledRef, _ := name.ParseReference(ref, name.Insecure)
	got, err := remote.Image(pulledRef)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" || cfg.Config.User != User || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != Entrypoint {
		t.Errorf("config: os %s arch %s user %q entrypoint %v", cfg.OS, cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint)
	}
	if len(cfg.Config.Env) != 1 || cfg.Config.Env[0] != "GHRUNNER_HANDLER=listener" {
		t.Errorf("env %v, want the listener's handler", cfg.Config.Env)
	}
	tr := tar.NewReader(mutate.Extract(got))
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(tr)
	if hdr.Name != "bootstrap" || hdr.Mode&0o111 == 0 || string(body) != "#!/bin/sh\necho listener\n" {
		t.Errorf("layer: %s mode %o body %q", hdr.Name, hdr.Mode, body)
	}
}

type fakeECR struct{ token, endpoint string }

func (f fakeECR) GetAuthorizationToken(context.Context, *ecr.GetAuthorizationTokenInput, ...func(*ecr.Options)) (*ecr.GetAuthorizationTokenOutput, error) {
	return &ecr.GetAuthorizationTokenOutput{AuthorizationData: []ecrtypes.AuthorizationData{{AuthorizationToken: aws.String(f.token), ProxyEndpoint: aws.String(f.endpoint)}}}, nil
}

func TestECRAuthReadsECRsUserAndPassword(t *testing.T) {
	tok := base64.StdEncoding.EncodeToString([]byte("AWS:secret-password"))
	auth, host, err := ECRAuth(context.Background(), fakeECR{tok, "https://123456789012.dkr.ecr.eu-west-1.amazonaws.com"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := auth.Authorization()
	if cfg.Username != "AWS" || cfg.Password != "secret-password" || host != "123456789012.dkr.ecr.eu-west-1.amazonaws.com" {
		t.Errorf("auth %+v host %s", cfg, host)
	}
	if _, _, err := ECRAuth(context.Background(), fakeECR{"not base64!", ""}); err == nil {
		t.Error("a token that is not base64 was accepted")
	}
}

func mustHost(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
