// Package actionrun runs a composite GitHub action the way the runner does,
// for tests: each step's `run:` script with `shell: bash` as GitHub starts
// it (bash --noprofile --norc -eo pipefail FILE), its env with the inputs
// put in, GITHUB_ACTION_PATH and a GITHUB_OUTPUT file per step, and the
// action's outputs from the steps' outputs. Only the expressions the
// action uses are known (inputs.*, steps.*.outputs.*, github.action_path);
// any other fails the test, so the harness never silently runs something
// GitHub would run differently.
package actionrun

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// Action is action.yml, as far as a composite action of bash steps goes.
type Action struct {
	Name   string
	Inputs map[string]struct {
		Description string
		Required    bool
		Default     string
	}
	Outputs map[string]struct {
		Description string
		Value       string
	}
	Runs struct {
		Using string
		Steps []Step
	}
}

// Step is one step of a composite action.
type Step struct {
	ID, Name, Shell, Run, If, Uses string
	Env                            map[string]string
}

// Read parses dir/action.yml.
func Read(t testing.TB, dir string) Action {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "action.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var a Action
	if err := yaml.Unmarshal(raw, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	return a
}

// Result is what a run of the action left: its outputs, what its steps
// printed, and the exit code of the step that failed (0: none did).
type Result struct {
	Outputs map[string]string
	Log     string
	Code    int
}

var expression = regexp.MustCompile(`\$\{\{\s*(.*?)\s*\}\}`)

// Expand replaces each ${{ name }} in s with ctx[name]; an expression ctx
// does not name is an error.
func Expand(s string, ctx map[string]string) (string, error) {
	var missing []string
	out := expression.ReplaceAllStringFunc(s, func(m string) string {
		name := expression.FindStringSubmatch(m)[1]
		v, ok := ctx[name]
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("expressions the harness does not know: %v", missing)
	}
	return out, nil
}

// Run runs the composite action in dir with inputs, in the environment env
// (the job's: GITHUB_ACTIONS, RUNNER_TEMP, the Actions runtime's token
// variables, PATH...).
func Run(t testing.TB, dir string, inputs map[string]string, env []string) Result {
	t.Helper()
	a := Read(t, dir)
	if a.Runs.Using != "composite" {
		t.Fatalf("runs.using %q: the harness runs composite actions", a.Runs.Using)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := map[string]string{"github.action_path": abs}
	for name, in := range a.Inputs {
		v, given := inputs[name]
		if !given {
			if in.Required {
				t.Fatalf("input %s is required", name)
			}
			v = in.Default
		}
		ctx["inputs."+name] = v
	}
	for name := range inputs {
		if _, ok := a.Inputs[name]; !ok {
			t.Fatalf("input %s: the action has no such input (GitHub warns and ignores it)", name)
		}
	}
	tmp := t.TempDir()
	var log bytes.Buffer
	code := 0
	for i, s := range a.Runs.Steps {
		if s.Uses != "" || s.If != "" || s.Shell != "bash" {
			t.Fatalf("step %d: uses %q, if %q, shell %q: the harness runs bash steps only", i, s.Uses, s.If, s.Shell)
		}
		script := filepath.Join(tmp, fmt.Sprintf("step%d.sh", i))
		output := filepath.Join(tmp, fmt.Sprintf("step%d.output", i))
		run, err := Expand(s.Run, ctx)
		if err != nil {
			t.Fatalf("step %d run: %v", i, err)
		}
		if err := os.WriteFile(script, []byte(run), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(output, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eo", "pipefail", script)
		cmd.Env = append(append([]string(nil), env...), "GITHUB_ACTION_PATH="+abs, "GITHUB_OUTPUT="+output)
		for k, v := range s.Env {
			v, err := Expand(v, ctx)
			if err != nil {
				t.Fatalf("step %d env %s: %v", i, k, err)
			}
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stdout, cmd.Stderr = &log, &log
		err = cmd.Run()
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if s.ID != "" {
			raw, _ := os.ReadFile(output)
			for k, v := range ParseOutput(t, string(raw)) {
				ctx["steps."+s.ID+".outputs."+k] = v
			}
		}
		if code != 0 {
			break // a failed step ends the action: later steps do not run
		}
	}
	r := Result{Outputs: map[string]string{}, Log: log.String(), Code: code}
	for name, o := range a.Outputs {
		// An output of a step that wrote none is empty, as on GitHub.
		v := expression.ReplaceAllStringFunc(o.Value, func(m string) string {
			name := expression.FindStringSubmatch(m)[1]
			if !strings.HasPrefix(name, "steps.") {
				t.Fatalf("output %s: expression %q", o.Value, name)
			}
			return ctx[name]
		})
		r.Outputs[name] = v
	}
	return r
}

// ParseOutput reads a GITHUB_OUTPUT file: name=value lines, and
// name<<DELIMITER blocks for values of several lines.
func ParseOutput(t testing.TB, raw string) map[string]string {
	t.Helper()
	out := map[string]string{}
	lines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" {
			continue
		}
		if k, delim, ok := strings.Cut(line, "<<"); ok && !strings.Contains(k, "=") {
			var value []string
			for i++; i < len(lines) && lines[i] != delim; i++ {
				value = append(value, lines[i])
			}
			if i == len(lines) {
				t.Fatalf("GITHUB_OUTPUT: %s<<%s has no end", k, delim)
			}
			out[k] = strings.Join(value, "\n")
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("GITHUB_OUTPUT: line %q is neither name=value nor name<<DELIMITER", line)
		}
		out[k] = v
	}
	return out
}
