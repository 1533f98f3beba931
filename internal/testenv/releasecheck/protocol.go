package releasecheck

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ManifestProtocols reads a registry manifest (terraform-registry-manifest.json,
// released as NAME_VERSION_manifest.json): the plugin protocol versions the
// Registry tells terraform the provider speaks. terraform refuses to
// install a provider whose protocols it does not speak, and goes by these,
// not by the binary, so they must be the binary's.
func ManifestProtocols(path string) ([]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m struct {
		Version  int
		Metadata struct {
			ProtocolVersions []string `json:"protocol_versions"`
		}
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if m.Version != 1 || len(m.Metadata.ProtocolVersions) == 0 {
		return nil, fmt.Errorf("%s: version %d with protocol_versions %v, want version 1 naming at least one protocol", path, m.Version, m.Metadata.ProtocolVersions)
	}
	return m.Metadata.ProtocolVersions, nil
}

// magicCookie is what terraform sets for a provider it starts; without it
// the provider refuses to serve. Key and value are terraform-plugin-go's
// (tfprotov6/tf6server/server.go and tfprotov5/tf5server/server.go, the
// same for both protocols).
const magicCookie = "TF_PLUGIN_MAGIC_COOKIE=d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"

// ServedProtocol starts the provider binary as terraform does, reads the
// handshake line it prints on stdout and stops it. hashicorp/go-plugin
// (server.go) writes that line as
// CORE-VERSION|APP-VERSION|NETWORK|ADDRESS|PROTOCOL|..., the application
// version being the plugin protocol's major version (5 or 6), which the
// provider serves as its own when the client names none
// (PLUGIN_PROTOCOL_VERSIONS unset).
func ServedProtocol(t testing.TB, provider string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, provider)
	// Its socket goes in TMPDIR.
	cmd.Env = append(os.Environ(), magicCookie, "TMPDIR="+t.TempDir())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", provider, err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	cancel()
	cmd.Wait()
	fields := strings.Split(strings.TrimSpace(line), "|")
	if err != nil || len(fields) < 5 || fields[0] != "1" {
		t.Fatalf("%s printed no go-plugin handshake line (%v): %q", provider, err, line)
	}
	return fields[1]
}
