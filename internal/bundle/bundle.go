// Package bundle names the artifacts the provider embeds (the Lambda bundle
// and the agent, per architecture) and the bundle's handlers, and builds
// their deterministic zips.
package bundle

import (
	"archive/zip"
	"bytes"
	"fmt"
	"time"
)

// The handlers of the Lambda bundle: the values of GHRUNNER_HANDLER, of a
// ghrunner_function's handler and of the module's function keys.
const (
	HandlerProvision = "provision"
	HandlerRelease   = "release"
	HandlerRefresh   = "refresh"
	HandlerScaleDown = "scale-down"
	// HandlerJIT consumes the state table's stream: it answers the agents'
	// requests for just-in-time runner configurations.
	HandlerJIT = "jit"
	// HandlerListener is no Lambda function's: the same binary run as a
	// long-lived process (an ECS task) serves the pools' runner scale sets
	// (lambdas/listener).
	HandlerListener = "listener"
)

// Handlers lists every handler, in the order a run uses them.
var Handlers = []string{HandlerProvision, HandlerJIT, HandlerRelease, HandlerRefresh, HandlerScaleDown}

// Architectures the provider ships artifacts for, in Lambda's spelling
// (GOARCH is the same word).
// BuildTags are the tags the bundle and the agent are built with.
// lambda.norpc leaves out aws-lambda-go's RPC entry point (the retired go1.x
// runtime's; provided.al2023 speaks the Runtime API) and with it net/rpc,
// whose reflection on method names keeps every exported method of every
// linked type: the bootstrap binary was 62 MB with it and is 15 MB without.
const BuildTags = "lambda.norpc"

var Architectures = []string{"arm64", "amd64"}

// LambdaArchitecture is Lambda's name for a GOARCH.
func LambdaArchitecture(goarch string) string {
	if goarch == "amd64" {
		return "x86_64"
	}
	return goarch
}

// FunctionZip is the file name of the Lambda bundle for an architecture.
func FunctionZip(arch string) string { return "bootstrap-linux-" + arch + ".zip" }

// Agent is the file name of the agent binary for an architecture.
func Agent(arch string) string { return "ghrunner-agent-linux-" + arch }

// epoch is the modification time of every zip entry: the zip's bytes, and so
// Lambda's CodeSha256, change only when the code does.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Zip returns a zip holding one executable file named name.
func Zip(name string, data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: epoch}
	h.SetMode(0o755)
	f, err := w.CreateHeader(h)
	if err != nil {
		return nil, fmt.Errorf("zip %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		return nil, fmt.Errorf("zip %s: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("zip %s: %w", name, err)
	}
	return buf.Bytes(), nil
}
