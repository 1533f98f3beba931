// Command fakerunner stands in for the GitHub Actions runner in tests. It
// honours the command-line contract ghrunner's agent relies on:
//
//	config.sh --unattended --url URL --token TOKEN --name NAME --labels L1,L2
//	          --no-default-labels --work DIR --replace [--runnergroup G]
//	config.sh remove --token TOKEN
//	run.sh
//
// configure writes .runner and .credentials like the real runner; run comes
// online, takes jobs for its labels one at a time, runs each with bash in
// <work>/<repo>/<repo>, and stops after the current job on SIGINT or SIGTERM.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// session identifies this run.sh process to the fake, which re-queues a job
// handed to a session that died before it started the job.
var session string

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fakerunner config|run [args]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "config":
		err = configure(os.Args[2:])
	case "run":
		err = run()
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// runnerFile is .runner, as the real runner writes it.
type runnerFile struct {
	AgentID    int64  `json:"agentId"`
	AgentName  string `json:"agentName"`
	PoolID     int64  `json:"poolId"`
	ServerURL  string `json:"serverUrl"`
	GitHubURL  string `json:"gitHubUrl"`
	WorkFolder string `json:"workFolder"`
}

type credentials struct {
	Scheme string            `json:"scheme"`
	Data   map[string]string `json:"data"`
}

// server returns the fake's root from a runner URL (scheme and host).
func server(runnerURL string) (string, error) {
	u, err := url.Parse(runnerURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("invalid --url %q", runnerURL)
	}
	return u.Scheme + "://" + u.Host, nil
}

func configure(args []string) error {
	if len(args) > 0 && args[0] == "remove" {
		return remove(args[1:])
	}
	fs := flag.NewFlagSet("config.sh", flag.ContinueOnError)
	unattended := fs.Bool("unattended", false, "")
	rawURL := fs.String("url", "", "")
	token := fs.String("token", os.Getenv("ACTIONS_RUNNER_INPUT_TOKEN"), "")
	name := fs.String("name", "", "")
	labels := fs.String("labels", "", "")
	noDefault := fs.Bool("no-default-labels", false, "")
	work := fs.String("work", "_work", "")
	replace := fs.Bool("replace", false, "")
	group := fs.String("runnergroup", "", "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if !*unattended {
		return errors.New("only --unattended configuration is supported")
	}
	if _, err := os.Stat(".runner"); err == nil {
		return errors.New("Cannot configure the runner because it is already configured. To reconfigure the runner, run 'config.cmd remove' or './config.sh remove' first.")
	}
	if *rawURL == "" || *token == "" || *name == "" {
		return errors.New("--url, --token and --name are required in unattended mode")
	}
	var ls []string
	if !*noDefault {
		ls = append(ls, "self-hosted", "Linux", "X64")
	}
	for _, l := range strings.Split(*labels, ",") {
		if l = strings.TrimSpace(l); l != "" {
			ls = append(ls, l)
		}
	}
	root, err := server(*rawURL)
	if err != nil {
		return err
	}
	var out struct {
		ID         int64  `json:"id"`
		Credential string `json:"credential"`
		PoolID     int64  `json:"poolId"`
	}
	if err := post(root+"/_fake/runners/register", "", map[string]any{"url": *rawURL, "token": *token, "name": *name, "labels": ls, "replace": *replace, "group": *group}, &out); err != nil {
		return fmt.Errorf("Failed to register the runner: %w", err)
	}
	wf := *work
	if !filepath.IsAbs(wf) {
		cwd, _ := os.Getwd()
		wf = filepath.Join(cwd, wf)
	}
	if err := writeJSON(".runner", runnerFile{AgentID: out.ID, AgentName: *name, PoolID: out.PoolID, ServerURL: root, GitHubURL: *rawURL, WorkFolder: wf}); err != nil {
		return err
	}
	if err := writeJSON(".credentials", credentials{Scheme: "OAuth", Data: map[string]string{"token": out.Credential}}); err != nil {
		return err
	}
	fmt.Printf("√ Runner successfully added\n√ Settings Saved.\n")
	return nil
}

func remove(args []string) error {
	fs := flag.NewFlagSet("config.sh remove", flag.ContinueOnError)
	token := fs.String("token", os.Getenv("ACTIONS_RUNNER_INPUT_TOKEN"), "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rf runnerFile
	if err := readJSON(".runner", &rf); err != nil {
		return errors.New("the runner is not configured")
	}
	if *token == "" {
		return errors.New("--token is required to remove the runner")
	}
	if err := post(rf.ServerURL+"/_fake/runners/remove", "", map[string]any{"url": rf.GitHubURL, "token": *token, "id": rf.AgentID}, nil); err != nil {
		return fmt.Errorf("Failed to remove the runner: %w", err)
	}
	os.Remove(".runner")
	os.Remove(".credentials")
	fmt.Println("√ Runner removed successfully")
	return nil
}

func run() error {
	var rf runnerFile
	var cred credentials
	if readJSON(".runner", &rf) != nil || readJSON(".credentials", &cred) != nil {
		return errors.New("Not configured. Run config.(sh/cmd) to configure the runner.")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	session = fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	fmt.Printf("√ Connected to GitHub\n\nCurrent runner version: 'fake'\nListening for Jobs\n")
	for ctx.Err() == nil {
		var job struct {
			ID     int64  `json:"id"`
			Script string `json:"script"`
			Repo   string `json:"repo"`
		}
		status, err := postStatus(rf.ServerURL+fmt.Sprintf("/_fake/runners/%d/poll", rf.AgentID), cred.Data["token"], nil, &job)
		switch {
		case status == http.StatusNotFound:
			return errors.New("Runner registration has been deleted from the server, please re-configure.")
		case err != nil:
			time.Sleep(500 * time.Millisecond)
			continue
		case status == http.StatusNoContent:
			continue
		}
		if post(rf.ServerURL+fmt.Sprintf("/_fake/jobs/%d/start", job.ID), cred.Data["token"], nil, nil) != nil {
			continue // not ours any more
		}
		// A job runs to its end even when a stop was asked meanwhile.
		code, output := execute(rf.WorkFolder, job.Repo, job.Script)
		post(rf.ServerURL+fmt.Sprintf("/_fake/jobs/%d/complete", job.ID), cred.Data["token"], map[string]any{"exitCode": code, "output": output}, nil)
		fmt.Printf("Job %d completed with result: %d\n", job.ID, code)
	}
	fmt.Println("Exiting...")
	return nil
}

func execute(work, repo, script string) (int, string) {
	dir := filepath.Join(work, repo, repo)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 1, err.Error()
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GITHUB_WORKSPACE="+dir, "RUNNER_WORKSPACE="+filepath.Join(work, repo))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		code = 1
		out.WriteString(err.Error())
	}
	return code, out.String()
}

func post(u, token string, body any, out any) error {
	status, err := postStatus(u, token, body, out)
	if err == nil && status >= 300 {
		err = fmt.Errorf("HTTP %d", status)
	}
	return err
}

func postStatus(u, token string, body any, out any) (int, error) {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Runner-Session", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var msg struct{ Message string }
		json.Unmarshal(data, &msg)
		return resp.StatusCode, fmt.Errorf("%s (HTTP %d)", msg.Message, resp.StatusCode)
	}
	if out != nil && len(data) > 0 {
		json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

func writeJSON(path string, v any) error {
	raw, _ := json.MarshalIndent(v, "", "  ")
	// The real runner writes its settings files with a UTF-8 byte order mark.
	return os.WriteFile(path, append([]byte("\xef\xbb\xbf"), raw...), 0o600)
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(bytes.TrimPrefix(raw, []byte("\xef\xbb\xbf")), v)
}
