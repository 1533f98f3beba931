// Command fakerunner stands in for the GitHub Actions runner in tests,
// behind the config.sh and run.sh wrappers fakegithub.InstallRunner writes
// (both change to the runner directory first, as the real config.sh does).
// It honours the command-line contract of the real runner that ghrunner's
// agent relies on:
//
//	config.sh [--unattended] --url URL --token TOKEN --name NAME --labels L1,L2
//	          [--no-default-labels] [--work DIR] [--replace] [--runnergroup G]
//	config.sh remove --token TOKEN [--local]
//	run.sh
//
// Arguments may also come from ACTIONS_RUNNER_INPUT_<NAME> variables (the
// command line wins), and are parsed as the real runner parses them.
// config.sh exchanges the token at <api>/actions/runner-registration like
// the real one, and fails (exit 1) with the real runner's message when
// GitHub answers 404; on success it writes .runner, .credentials and
// .credentials_rsaparams (with a UTF-8 byte order mark, as .NET writes them).
// run.sh behaves as run.sh, run-helper.sh and Runner.Listener together: it
// comes online, takes jobs for its labels one at a time, runs each with
// bash -c in <work>/<repo>/<repo>, and on SIGINT or SIGTERM stops,
// cancelling the current job (its post step still runs). Like the real
// run.sh it exits 0 when the listener ends, also when it is not configured
// or its registration was deleted, or another listener held the runner's
// session for as long as the listener retried (exit code 5); it says why
// on its output. Sent an update message, the listener updates itself while
// it goes on polling, exits for the update, and run.sh launches the updated
// listener again (version.go).
package main

import (
	"fmt"
	"os"
	"strings"
)

// Here: main, and the runner's environment (.env, .path). Each command
// has its file: config.sh in config.go (its command line in args.go, its
// files in files.go), run.sh in listener.go, a job in job.go, the HTTP calls
// in http.go.

// The real listener's return codes (src/Runner.Common/Constants.cs).
const (
	codeSuccess         = 0
	codeTerminatedError = 1
	codeSessionConflict = 5
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fakerunner config|run [args]")
		os.Exit(2)
	}
	args := os.Args[2:]
	runEnv = os.Environ() // before parse clears the ACTIONS_RUNNER_INPUT_ variables
	switch os.Args[1] {
	case "--version":
		fmt.Println(version())
		os.Exit(codeSuccess)
	case "config":
		refuseRoot("Must not run with sudo")
		envSH()
		if len(args) > 0 && strings.EqualFold(args[0], "remove") {
			os.Exit(remove(parse("remove", args[1:])))
		}
		os.Exit(configure(parse("configure", args)))
	case "run":
		refuseRoot("Must not run interactively with sudo")
		os.Exit(runScript(parse("run", args)))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

// refuseRoot is the first check of config.sh and run-helper.sh
// (src/Misc/layoutroot/config.sh, run-helper.sh.template): as root they
// stop, unless RUNNER_ALLOW_RUNASROOT is set.
func refuseRoot(msg string) {
	if os.Getuid() == 0 && os.Getenv("RUNNER_ALLOW_RUNASROOT") == "" {
		fmt.Println(msg)
		os.Exit(1)
	}
}

// envSH is env.sh, which config.sh sources before configuring or removing
// (src/Misc/layoutroot/env.sh): it creates .env if missing, appends the
// variables of its list that the environment sets and .env does not name,
// and writes $PATH to .path.
func envSH() {
	raw, _ := os.ReadFile(".env")
	contents := string(raw)
	f, err := os.OpenFile(".env", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	for _, name := range []string{"LANG", "JAVA_HOME", "ANT_HOME", "M2_HOME", "ANDROID_HOME", "ANDROID_SDK_ROOT", "GRADLE_HOME", "NVM_BIN", "NVM_PATH", "LD_LIBRARY_PATH", "PERL5LIB"} {
		if v := os.Getenv(name); v != "" && !strings.Contains(contents, name+"=") {
			fmt.Fprintf(f, "%s=%s\n", name, v)
		}
	}
	os.WriteFile(".path", []byte(os.Getenv("PATH")+"\n"), 0o644)
}

// loadEnv is the listener's LoadAndSetEnv (src/Runner.Listener/Program.cs):
// every "NAME=value" line of <root>/.env is set in its environment, which
// every job inherits.
func loadEnv() {
	raw, err := os.ReadFile(".env")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if i := strings.IndexByte(line, '='); i > 0 {
			os.Setenv(line[:i], line[i+1:])
		}
	}
}
