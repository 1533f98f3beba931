package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/fakegithub"
)

// Repo is the repository whose workflows the sandbox plays: its jobs'
// OIDC tokens are what provision and release bind runs to.
const Repo = Org + "/app"

// Audience is the audience the deployment's functions want (the module's
// default oidc_audience).
const Audience = "ghrunner"

// sign adds to a provision or release payload the OIDC token a job of
// Repo's workflow run named by the payload's runId would send, as
// invoke.sh does from the Actions runtime. Anything else (no runId, an
// idToken already, not an object) goes as it is.
func (s *Sandbox) sign(payload []byte) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil {
		return payload
	}
	var runID string
	if _, has := fields["idToken"]; has || json.Unmarshal(fields["runId"], &runID) != nil || runID == "" {
		return payload
	}
	tok, _ := json.Marshal(s.GitHub.IDToken(fakegithub.Workflow{Repository: Repo, RunID: runID}, Audience))
	fields["idToken"] = tok
	out, err := json.Marshal(fields)
	if err != nil {
		return payload
	}
	return out
}

// serveIDToken stands in for the Actions runtime of a job of Repo's
// workflow run: POST {"runId": "<run_id>"} answers {"value": "<token>"}.
// Only the sandbox's own clients (its command, its tests) call it: it is
// how a payload built outside the sandbox's process gets a token.
func (s *Sandbox) serveIDToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RunID      string `json:"runId"`
		RunAttempt int    `json:"runAttempt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.RunID == "" {
		http.Error(w, `body: want {"runId":"<workflow run id>"}`, http.StatusBadRequest)
		return
	}
	json.NewEncoder(w).Encode(map[string]string{"value": s.GitHub.IDToken(fakegithub.Workflow{Repository: Repo, RunID: req.RunID, RunAttempt: req.RunAttempt}, Audience)})
}

// Sign is sign for a client of a sandbox at endpoint (its front URL,
// AWS_ENDPOINT_URL): the token comes from the sandbox's /_sandbox/idtoken.
func Sign(ctx context.Context, endpoint string, payload []byte) ([]byte, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(payload, &fields) != nil {
		return payload, nil
	}
	var runID string
	if _, has := fields["idToken"]; has || json.Unmarshal(fields["runId"], &runID) != nil || runID == "" {
		return payload, nil
	}
	body, _ := json.Marshal(map[string]string{"runId": runID})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/_sandbox/idtoken", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the sandbox's token for run %s: %w", runID, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var tok struct{ Value string }
	if res.StatusCode != http.StatusOK || json.Unmarshal(raw, &tok) != nil || tok.Value == "" {
		return nil, fmt.Errorf("the sandbox's token for run %s: %s %s", runID, res.Status, raw)
	}
	fields["idToken"], _ = json.Marshal(tok.Value)
	return json.Marshal(fields)
}
