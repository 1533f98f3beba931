package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
)

// StartJIT starts a just-in-time runner: in a fresh copy of the install
// (the last listener deleted its configuration, and a copy holds nothing
// of the job before), run.sh takes the configuration GitHub made, which
// registers exactly this runner for one job. The value travels in
// ACTIONS_RUNNER_INPUT_JITCONFIG, which the runner reads like --jitconfig
// and removes from its environment (a command line is visible to every
// user in ps); its work folder is set to WorkDir, which GitHub cannot know.
func (r *Runner) StartJIT(config string) error {
	value, err := withWorkFolder(config, r.WorkDir)
	if err != nil {
		return err
	}
	if err := r.fresh(nil); err != nil {
		return err
	}
	if err := os.MkdirAll(r.WorkDir, 0o755); err != nil {
		return err
	}
	if err := r.chown(r.WorkDir); err != nil {
		return err
	}
	return r.start([]string{"ACTIONS_RUNNER_INPUT_JITCONFIG=" + value})
}

// withWorkFolder rewrites the workFolder of the configuration's .runner:
// base64 of a JSON object from file name to the base64 of the file.
func withWorkFolder(config, work string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(config)
	if err != nil {
		return "", fmt.Errorf("just-in-time configuration: not base64: %w", err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return "", fmt.Errorf("just-in-time configuration: not a JSON object: %w", err)
	}
	settings, err := base64.StdEncoding.DecodeString(files[".runner"])
	if err != nil || len(settings) == 0 {
		return "", fmt.Errorf("just-in-time configuration: no readable .runner")
	}
	var fields map[string]any
	if err := json.Unmarshal(bytes.TrimPrefix(settings, []byte("\xef\xbb\xbf")), &fields); err != nil {
		return "", fmt.Errorf("just-in-time configuration: .runner: %w", err)
	}
	fields["workFolder"] = work
	settings, _ = json.Marshal(fields)
	files[".runner"] = base64.StdEncoding.EncodeToString(settings)
	raw, _ = json.Marshal(files)
	return base64.StdEncoding.EncodeToString(raw), nil
}
