package runner

// The environment of config.sh and run.sh, and so of every job. Invariant:
// it is built here, whole, never inherited: a variable an operator sets
// for the agent (a credential, a debug switch, LD_PRELOAD) reaches no job.
// What a job finds is PATH, HOME, USER, LOGNAME, LANG, the tool cache
// variables, the proxy variables the runner needs to reach GitHub, the
// runner's RUNNER_ALLOW_RUNASROOT when the agent's own user runs it, and
// what the agent passes to one command on purpose (the token or the
// just-in-time configuration, which the runner takes out of its
// environment).
//
// The tool cache (actions/setup-* unpack toolchains there) is ToolCache,
// in the work folder: it is wiped with the work folder between jobs and
// between assignments, and Verify's empty work folder covers it. The
// hosted images' /opt/hostedtoolcache, shared and never wiped, would let
// one run's job plant a "cached" toolchain the next run's job executes.

import (
	"os"
	"os/user"
	"path/filepath"
)

// safePath is the PATH of the runner's commands: the system's folders only.
const safePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// passedOn are the agent's variables the runner gets, when set: the proxy
// settings the runner reaches GitHub through, and the switch that lets the
// runner run as root (only ever needed when the agent's own user runs it).
var passedOn = []string{"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "RUNNER_ALLOW_RUNASROOT"}

// ToolCache is where the jobs' tool cache lives: inside the work folder.
func (r *Runner) ToolCache() string { return filepath.Join(r.WorkDir, "_tool") }

// environment is the whole environment of a runner command run as name
// (empty: the agent's own user) with home.
func (r *Runner) environment(name, home string) []string {
	if name == "" {
		if me, err := user.Current(); err == nil {
			name, home = me.Username, me.HomeDir
		}
	}
	lang := os.Getenv("LANG")
	if lang == "" {
		lang = "C.UTF-8"
	}
	env := []string{"PATH=" + safePath, "HOME=" + home, "USER=" + name, "LOGNAME=" + name, "LANG=" + lang,
		"RUNNER_TOOL_CACHE=" + r.ToolCache(), "AGENT_TOOLSDIRECTORY=" + r.ToolCache()}
	for _, k := range passedOn {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}
