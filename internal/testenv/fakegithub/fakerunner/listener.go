package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// run.sh: run.sh and run-helper.sh around the listener (Runner.Listener
// run), a just-in-time configuration applied, the listener's session and
// message loop, and taking a job and reporting it.

// runScript is run.sh and run-helper.sh: the listener's return code is
// reported, and run.sh exits 0; after an update (listener exit 3 or 4)
// run-helper.sh exits 2 and run.sh launches the listener again
// (relaunch).
func runScript(c command) int {
	if jit := c.arg("jitconfig"); jit != "" {
		if err := applyJIT(jit); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 0
		}
	}
	code := listen()
	switch code {
	case codeSuccess:
		fmt.Println("Runner listener exit with 0 return code, stop the service, no retry needed.")
	case codeVersionDeprecated:
		// Returned only where the variable asks for it; run-helper.sh
		// then passes 7 on.
		fmt.Printf("Runner listener exit with deprecated version exit code: %d.\n", code)
		fmt.Println("Exiting runner...")
		return codeVersionDeprecated
	case codeUpdating, codeRunOnceUpdating:
		applyUpdate()
		return relaunch(waitUpdate())
	case codeTerminatedError:
		fmt.Println("Runner listener exit with terminated error, stop the service, no retry needed.")
	case codeSessionConflict:
		fmt.Println("Runner listener exit with Session Conflict error, stop the service, no retry needed.")
	default:
		fmt.Printf("Exiting with unknown error code: %d\n", code)
	}
	fmt.Println("Exiting runner...")
	return 0
}

// applyJIT writes the files of a just-in-time configuration into the
// runner's root, as the listener does with --jitconfig: the value is the
// base64 of a JSON object from file name to the base64 of its content.
func applyJIT(value string) error {
	raw, err := base64.StdEncoding.DecodeString(value)
	if err != nil {
		return fmt.Errorf("An error occurred: the jitconfig is not base64: %v", err)
	}
	var files map[string]string
	if err := json.Unmarshal(raw, &files); err != nil {
		return fmt.Errorf("An error occurred: the jitconfig is not a JSON object: %v", err)
	}
	for name, content := range files {
		data, err := base64.StdEncoding.DecodeString(content)
		if err != nil || strings.ContainsAny(name, "/\\") {
			return fmt.Errorf("An error occurred: the jitconfig entry %q is not valid", name)
		}
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return fmt.Errorf("An error occurred: %v", err)
		}
	}
	return nil
}

type listener struct {
	settings settings
	secret   string
	session  string
	root     string
}

type sessionInfo struct {
	SessionID       string `json:"sessionId"`
	HeartbeatMillis int64  `json:"heartbeatMillis"`
	// The answer to a session another listener holds: how long to wait
	// before asking again, and how long to keep asking.
	RetryMillis int64 `json:"retryMillis"`
	LimitMillis int64 `json:"limitMillis"`
}

const deletedMessage = "Failed to create a session. The runner registration has been deleted from the server, please re-configure. Runner registrations are automatically deleted for runners that have not connected to the service recently."

// goneMessage is what the listener says when its runner disappears while it
// waits for messages (Runner.cs, "Runner registration no longer exists
// while retrieving messages").
const goneMessage = "The runner no longer exists on the server. Cleaning up local configuration."

func stamp() string { return time.Now().UTC().Format("2006-01-02 15:04:05Z") }

// listen is Runner.Listener run; it returns the listener's code.
func listen() int {
	loadEnv()
	l := &listener{}
	var key keyFile
	if readFile(runnerFile, &l.settings) != nil || !exists(credFile) || readFile(keyFileN, &key) != nil {
		fmt.Fprintln(os.Stderr, "An error occurred: Not configured. Run config.(sh/cmd) to configure the runner.")
		return codeTerminatedError
	}
	l.secret = key.Secret
	l.root, _ = os.Getwd()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-signals
		fmt.Println("Exiting...")
		stop()
	}()

	sess, code, ok := l.createSession(ctx)
	if !ok {
		return code
	}
	l.session = sess.SessionID
	// github.com moves every runner to its newer service at its first
	// session; the listener keeps what it was migrated to beside the
	// configured files (the runner's ConfigurationStore, "_migrated").
	if raw, err := os.ReadFile(runnerFile); err == nil {
		os.WriteFile(migratedRunnerFile, raw, 0o644)
	}
	if raw, err := os.ReadFile(credFile); err == nil {
		os.WriteFile(migratedCredFile, raw, 0o600)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		call(dctx, http.MethodDelete, l.url("runners/%d/session"), l.auth(), l.session, nil, nil)
	}()
	success("Connected to GitHub")
	fmt.Printf("\nCurrent runner version: '%s'\n%s: Listening for Jobs\n", version(), stamp())

	// An update under way (selfUpdate): the listener goes on polling and
	// takes no job until it ends, then exits for run.sh to launch the
	// updated one (Runner.cs, RunAsync: Task.WhenAny of the next message
	// and the update task; a job message meanwhile is not deleted,
	// skipMessageDeletion, and the service hands it out again).
	var upd *selfUpdate
	for ctx.Err() == nil {
		if upd != nil && upd.finished() {
			if upd.err == nil {
				fmt.Println("Runner will exit shortly for update, should be back online within 10 seconds.")
				if l.settings.Ephemeral {
					return codeRunOnceUpdating
				}
				return codeUpdating
			}
			fmt.Fprintf(os.Stderr, "%s: An error occurred: runner update failed: %v\n", stamp(), upd.err)
			upd = nil
		}
		var job struct {
			ID     int64  `json:"id"`
			Script string `json:"script"`
			Post   string `json:"post"`
			Repo   string `json:"repo"`
			Label  string `json:"label"`
			// An update message (Runner.cs: RunnerRefreshMessage, as
			// SelfUpdaterV2.cs reads it) instead of a job.
			Type           string `json:"type"`
			TargetVersion  string `json:"targetVersion"`
			DownloadURL    string `json:"downloadUrl"`
			SHA256Checksum string `json:"sha256Checksum"`
			// A refusal's kind (the broker's BrokerError.errorKind).
			ErrorKind string `json:"errorKind"`
		}
		pctx, cancelPoll := context.WithCancel(ctx)
		if upd != nil {
			go func(u *selfUpdate) {
				select {
				case <-u.done:
					cancelPoll() // the update ended: stop waiting for a message
				case <-pctx.Done():
				}
			}(upd)
		}
		status, msg, err := call(pctx, http.MethodPost, l.url("runners/%d/poll")+versionQuery(l.settings.DisableUpdate), l.auth(), l.session, nil, &job)
		cancelPoll()
		switch {
		case ctx.Err() != nil:
		case upd != nil && upd.finished():
			// Whatever the poll got is dropped: a job not acknowledged
			// goes back to the queue.
		case status == http.StatusForbidden:
			if code, goOn := l.forbidden(ctx, job.ErrorKind, msg, &sess); !goOn {
				return code
			}
		case status == http.StatusOK && job.Type == "RunnerRefresh":
			if upd == nil {
				upd = startUpdate(l.workFolder(), job.TargetVersion, job.DownloadURL, job.SHA256Checksum)
			}
		case status == http.StatusOK && job.ID != 0 && upd != nil:
			sleep(ctx, 200*time.Millisecond) // not taken: handed out again at the next poll
		case err != nil || status >= 500:
			sleep(ctx, 500*time.Millisecond)
		case status == http.StatusNotFound:
			// The runner is gone (deleted, or removed by GitHub while
			// idle: fakegithub jit.go). actions/runner since #4551
			// (src/Runner.Listener/Runner.cs, RunAsync: the catch of
			// TaskAgentNotFoundException or RunnerNotFoundException in the
			// message loop) says so on stderr, deletes its local
			// configuration and returns Success; run-helper.sh then says
			// "Runner listener exit with 0 return code". Issue #4726 shows
			// exactly these lines for an idle just-in-time runner.
			fmt.Fprintln(os.Stderr, goneMessage)
			deleteLocal()
			return codeSuccess
		case status == http.StatusUnauthorized:
			fmt.Fprintln(os.Stderr, "Runner registration has been deleted from the server, please re-configure.")
			return codeTerminatedError
		case status == http.StatusOK && job.ID != 0:
			l.take(ctx, sess, job.ID, job.Repo, job.Label, job.Script, job.Post)
			if l.settings.Ephemeral {
				deleteLocal()
				return codeSuccess
			}
		}
	}
	return codeSuccess
}

// workFolder is the runner's work folder (_work under its root by default).
func (l *listener) workFolder() string {
	work := l.settings.WorkFolder
	if work == "" {
		work = "_work"
	}
	if !filepath.IsAbs(work) {
		work = filepath.Join(l.root, work)
	}
	return work
}

func (l *listener) url(format string) string {
	return l.settings.ServerURL + fmt.Sprintf(format, l.settings.AgentID)
}

func (l *listener) auth() string { return "Bearer " + l.secret }

// take runs one job: acknowledges it, runs it while heartbeating, reports
// the result. A stop asked meanwhile cancels it (execute).
func (l *listener) take(ctx context.Context, sess sessionInfo, id int64, repo, label, script, post string) {
	jobURL := fmt.Sprintf("%sjobs/%d/", l.settings.ServerURL, id)
	if status := l.report(jobURL+"start", nil); status >= 300 {
		return // not ours (any more); the server settles it at the next poll
	}
	name := fmt.Sprintf("job %d (%s)", id, label)
	fmt.Printf("%s: Running job: %s\n", stamp(), name)
	// The real listener starts a Worker process for each job, which
	// writes its trace to _diag/Worker_<time>-utc.log in the runner's root
	// (src/Runner.Common/HostTraceListener.cs): the agent reads that a
	// runner ran a job from it.
	if err := os.MkdirAll(filepath.Join(l.root, "_diag"), 0o755); err == nil {
		os.WriteFile(filepath.Join(l.root, "_diag", "Worker_"+time.Now().UTC().Format("20060102-150405")+"-utc.log"),
			[]byte(fmt.Sprintf("[%s INFO Worker] Job message received: %s\n", stamp(), name)), 0o644)
	}

	hbCtx, stopHB := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Duration(max(sess.HeartbeatMillis, 50)) * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-hbCtx.Done():
				return
			case <-tick.C:
				call(hbCtx, http.MethodPost, l.url("runners/%d/heartbeat"), l.auth(), l.session, nil, nil)
			}
		}
	}()
	code, result, output := l.execute(ctx, repo, script, post)
	stopHB()
	wg.Wait()

	l.report(jobURL+"complete", map[string]any{"exitCode": code, "result": result, "output": output})
	fmt.Printf("%s: Job %s completed with result: %s\n", stamp(), name, map[string]string{"succeeded": "Succeeded", "failed": "Failed", "cancelled": "Canceled"}[result])
}

// report posts a job's start or result, retrying network and server errors
// a few times; it returns the last status (0: no answer).
func (l *listener) report(u string, body any) int {
	status := 0
	for attempt := 1; attempt <= 5; attempt++ {
		var err error
		status, _, err = call(context.Background(), http.MethodPost, u, l.auth(), l.session, body, nil)
		if err == nil && status < 500 {
			return status
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	return status
}
