// Package image builds the listener's container image from the bundle's
// bootstrap binary and pushes it, with go-containerregistry: no docker on
// the deployer's machine, no base image and no registry outside the
// account.
//
// The image is one layer holding /bootstrap (the static binary every
// function runs), run as the listener (GHRUNNER_HANDLER=listener) by a
// non-root user. It is reproducible: the same binary makes the same digest,
// so an apply that changes nothing pushes nothing and the service keeps
// its task definition.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/bundle"
)

// Entrypoint is where the binary is in the image.
const Entrypoint = "/bootstrap"

// User is the image's user: no root in the container (ECS on Fargate runs
// the image's user unless the task definition says otherwise). 65532 is
// the usual "nonroot" of distroless images; no passwd entry is needed.
const User = "65532:65532"

// epoch is every timestamp in the image: a reproducible build.
var epoch = time.Unix(0, 0).UTC()

// Build makes the listener's image for arch (arm64 or amd64, Lambda's and
// Go's word) from the bootstrap binary.
func Build(bootstrap []byte, arch string) (v1.Image, error) {
	if arch != "arm64" && arch != "amd64" {
		return nil, fmt.Errorf("architecture: %q must be arm64 or amd64", arch)
	}
	if len(bootstrap) == 0 {
		return nil, errors.New("bootstrap: empty binary")
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(Entrypoint, "/"), Mode: 0o755, Size: int64(len(bootstrap)),
		Typeflag: tar.TypeReg, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bootstrap); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = arch, "linux"
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.Env = []string{"GHRUNNER_HANDLER=" + bundle.HandlerListener}
	cfg.Config.User = User
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.title": "ghrunner listener"}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	return mutate.ConfigMediaType(img, types.OCIConfigJSON), nil
}

// Push pushes img to ref ("<registry>/<repository>:<tag>") and returns the
// reference by digest ("<registry>/<repository>@sha256:…"), which task
// definitions should name: a tag can move.
func Push(ctx context.Context, img v1.Image, ref string, auth authn.Authenticator, opts ...name.Option) (string, error) {
	tag, err := name.NewTag(ref, opts...)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	if err := remote.Write(tag, img, remote.WithAuth(auth), remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	return tag.Context().Digest(digest.String()).String(), nil
}

// ECRAPI is what pushing to ECR asks of it.
type ECRAPI interface {
	GetAuthorizationToken(ctx context.Context, in *ecr.GetAuthorizationTokenInput, opts ...func(*ecr.Options)) (*ecr.GetAuthorizationTokenOutput, error)
}

// ECRAuth is the registry login ECR gives (GetAuthorizationToken: a
// base64 "AWS:<password>" valid 12 hours) and its registry's host.
func ECRAuth(ctx context.Context, api ECRAPI) (authn.Authenticator, string, error) {
	out, err := api.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return nil, "", fmt.Errorf("ECR GetAuthorizationToken: %w", err)
	}
	if len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
		return nil, "", errors.New("ECR GetAuthorizationToken: no authorization data")
	}
	d := out.AuthorizationData[0]
	raw, err := base64.StdEncoding.DecodeString(*d.AuthorizationToken)
	if err != nil {
		return nil, "", fmt.Errorf("ECR authorization token: %w", err)
	}
	user, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, "", errors.New("ECR authorization token: not user:password")
	}
	host := ""
	if d.ProxyEndpoint != nil {
		host = strings.TrimPrefix(strings.TrimPrefix(*d.ProxyEndpoint, "https://"), "http://")
	}
	return &authn.Basic{Username: user, Password: pass}, host, nil
}
