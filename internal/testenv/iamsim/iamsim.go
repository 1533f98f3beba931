// Package iamsim asks a real IAM policy evaluator whether a request is
// allowed: the npm package @cloud-copilot/iam-simulate (installed into
// tools/iamsim by scripts/ensure-iamsim, run by `make tools`), which models
// AWS's policy language, condition operators, policy variables and each
// action's resource types and condition keys. It runs as one node process
// that answers JSON lines; this package only builds requests and reads
// answers. Test world only: nothing shipped imports it.
//
// The evaluator is strict as AWS is: a condition on a key the request does
// not carry fails. It also reports context keys the action does not know
// (Decision.Ignored); callers treat those as a mistake in the request they
// built, not as something to shrug off.
package iamsim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// Request is one authorization question: may Principal perform Action on
// Resource, given Context, under the identity Policies (and Boundaries).
type Request struct {
	Principal  string              `json:"principal"`
	Account    string              `json:"account"`
	Action     string              `json:"action"`
	Resource   string              `json:"resource"`
	Context    map[string][]string `json:"context,omitempty"`
	Policies   []Policy            `json:"policies"`
	Boundaries []Policy            `json:"boundaries,omitempty"`
	// ResourcePolicy is the resource's own policy (a role's trust policy
	// for sts:AssumeRole), if any.
	ResourcePolicy json.RawMessage `json:"resourcePolicy,omitempty"`
}

// Policy is one named policy document (JSON).
type Policy struct {
	Name     string          `json:"name"`
	Document json.RawMessage `json:"document"`
}

// Decision is the evaluator's answer.
type Decision struct {
	Result  string   `json:"decision"` // Allowed, ImplicitlyDenied, ExplicitlyDenied
	Ignored []string `json:"ignored"`  // context keys the action does not use
	Why     []string `json:"why"`      // the statements that matched the action and what failed
}

// Allowed reports whether the request is allowed.
func (d Decision) Allowed() bool { return d.Result == "Allowed" }

type answer struct {
	ID     int      `json:"id"`
	Errors []string `json:"errors"`
	Decision
}

// Evaluator is a running evaluator process; safe for concurrent use.
type Evaluator struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	next   int
	wait   map[int]chan answer
	closed error
}

// InstallHint says how to get the evaluator when it is missing.
const InstallHint = "the IAM evaluator is not installed: run `make tools` (or scripts/ensure-iamsim, which runs npm ci in tools/iamsim; Node.js 18+ and npm are needed)"

// Dir finds tools/iamsim from the working directory upwards (tests run in
// their package's directory, the sandbox in the repository).
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "tools", "iamsim", "evaluate.mjs")); err == nil {
			return filepath.Join(d, "tools", "iamsim"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("tools/iamsim not found above %s", wd)
		}
	}
}

// Start runs the evaluator installed in dir (tools/iamsim).
func Start(dir string) (*Evaluator, error) {
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@cloud-copilot", "iam-simulate")); err != nil {
		return nil, errors.New(InstallHint)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New(InstallHint)
	}
	cmd := exec.Command(node, "evaluate.mjs")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the IAM evaluator: %w", err)
	}
	e := &Evaluator{cmd: cmd, stdin: stdin, wait: map[int]chan answer{}}
	go e.read(stdout)
	return e, nil
}

func (e *Evaluator) read(stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			continue
		}
		e.mu.Lock()
		ch := e.wait[a.ID]
		delete(e.wait, a.ID)
		e.mu.Unlock()
		if ch != nil {
			ch <- a
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = errors.New("the IAM evaluator exited")
	for id, ch := range e.wait {
		close(ch)
		delete(e.wait, id)
	}
}

// Evaluate asks one question. An action the evaluator does not know, a
// resource that is not one of the action's types, or a dead evaluator is an
// error, never an allow.
func (e *Evaluator) Evaluate(ctx context.Context, r Request) (Decision, error) {
	line, err := json.Marshal(struct {
		ID int `json:"id"`
		Request
	}{0, r})
	if err != nil {
		return Decision{}, err
	}
	ch := make(chan answer, 1)
	e.mu.Lock()
	if e.closed != nil {
		e.mu.Unlock()
		return Decision{}, e.closed
	}
	e.next++
	id := e.next
	e.wait[id] = ch
	// The id goes first so the line stays one JSON object.
	line = append([]byte(fmt.Sprintf(`{"id":%d,`, id)), line[len(`{"id":0,`):]...)
	_, err = e.stdin.Write(append(line, '\n'))
	e.mu.Unlock()
	if err != nil {
		return Decision{}, fmt.Errorf("the IAM evaluator: %w", err)
	}
	select {
	case a, ok := <-ch:
		if !ok {
			return Decision{}, errors.New("the IAM evaluator exited")
		}
		if a.Result == "Error" || len(a.Errors) > 0 {
			return Decision{}, fmt.Errorf("the IAM evaluator refused %s on %s: %s", r.Action, r.Resource, strings.Join(a.Errors, "; "))
		}
		return a.Decision, nil
	case <-ctx.Done():
		e.mu.Lock()
		delete(e.wait, id)
		e.mu.Unlock()
		return Decision{}, ctx.Err()
	}
}

// Close stops the evaluator.
func (e *Evaluator) Close() {
	e.stdin.Close()
	e.cmd.Wait()
}

// Tags are the condition keys of a set of tags: with the prefix
// "aws:RequestTag/" the tags a request sets (and aws:TagKeys, sorted), with
// "aws:ResourceTag/" the tags a resource has.
func Tags(prefix string, tags map[string]string) map[string][]string {
	cx := map[string][]string{}
	keys := make([]string, 0, len(tags))
	for k, v := range tags {
		cx[prefix+k] = []string{v}
		keys = append(keys, k)
	}
	if prefix == "aws:RequestTag/" && len(keys) > 0 {
		sort.Strings(keys)
		cx["aws:TagKeys"] = keys
	}
	return cx
}

// Merge joins request contexts; a later one's key wins.
func Merge(cxs ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, cx := range cxs {
		for k, v := range cx {
			out[k] = v
		}
	}
	return out
}
