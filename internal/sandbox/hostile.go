package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ghrunner/terraform-provider-ghrunner/internal/testenv/testbin"
)

// Hostile jobs in the chaos suite (invariant 8). A workflow that draws
// faultHostileJob runs, as its first job, a job that tries to persist on
// its instance: a line in the runner's .env (the listener loads it into
// every later job), a setsid daemon deaf to the stop signals, files in the
// home, /tmp and /dev/shm. Every chaos job first looks for what such a job
// of another run left on its instance and fails saying so; the daemon
// reports, into a drop box no cleanup touches, any other run's workspace it
// sees. It also leaves what takes system calls (internal/testenv/hostilejob):
// a daemon whose main thread exited while a worker thread lists the work
// folder (State Z in /proc, issue 29 item 2), SysV IPC objects, a POSIX
// message queue and keys in its user keyrings, and files in root's
// world-writable folders below /tmp (item 5). As for the rest, a job fails
// when it finds what another run left: a token runner takes the jobs of
// its run in a row and may meet its own run's (a just-in-time one does
// not: the agent cleans up between them, item 4, which
// agent/jit_test.go's TestAJITJobOfARunReachesNothingOfTheNextJobOfTheSameRun
// shows). The runners run as a user of their instance's own (instancehost's
// RunnerUsers), so "its own" means what this instance's runner user owns.

const faultHostileJob = "a hostile job: .env line, setsid and thread daemons, home, /tmp and nested /tmp files, IPC objects, keys"

// leftoverMark starts the line a job prints when it finds another run's
// leftovers.
const leftoverMark = "HOSTILE LEFTOVER"

// jobPrologue is what every chaos job runs first: it fails the job when
// anything a hostile job of another run planted is still there, and marks
// the job's workspace with its run for a surviving spy to find.
func jobPrologue(runID string, k hostileKit) string {
	return fmt.Sprintf(`run=%q hj=%q ww=%q
me=$(id -u)
found=""
for f in "$ww"/ghr-hostile-* "$ww"/deep/ghr-hostile-*; do
	[ -e "$f" ] && [ "$(stat -c %%u "$f")" = "$me" ] || continue
	case "$f" in *"-$run") ;; *) found="$found file:$f" ;; esac
done
own=$(cat "%s/$run.thread/pid" 2>/dev/null)
for p in /proc/[0-9]*; do
	[ "$(stat -c %%u "$p" 2>/dev/null)" = "$me" ] && [ "${p#/proc/}" != "$own" ] || continue
	if grep -q '^State:.*Z' "$p/status" 2>/dev/null && [ "$(ls "$p/task" 2>/dev/null | wc -l)" -gt 1 ]; then found="$found thread-daemon:${p#/proc/}"; fi
done
ipc=$("$hj" probe-ipc "$run" 2>&1) || found="$found probe-ipc-failed"
[ -z "$ipc" ] || found="$found ipc:$(echo $ipc | head -c 120)"
if [ -n "${GHR_HOSTILE:-}" ] && [ "$GHR_HOSTILE" != "$run" ]; then found="$found env:GHR_HOSTILE=$GHR_HOSTILE"; fi
for f in ~/.ghr-hostile-* /tmp/ghr-hostile-* /dev/shm/ghr-hostile-*; do
	[ -e "$f" ] || continue
	[ "$(stat -c %%u "$f")" = "$me" ] || continue
	case "$f" in *"-$run") ;; *) found="$found file:$f" ;; esac
done
daemon="ghr-hostile""-daemon-" # split: this script's own command line must not match
for p in /proc/[0-9]*; do
	[ "$(stat -c %%u "$p" 2>/dev/null)" = "$me" ] || continue
	c=$(tr "\0" " " <"$p/cmdline" 2>/dev/null)
	case "$c" in *"$daemon"*) case "$c" in *"$daemon$run "*) ;; *) found="$found process:${c:0:80}" ;; esac ;; esac
done
if [ -n "$found" ]; then echo "%s:$found"; exit 42; fi
touch "ghr-ws-$run"
`, runID, k.hj, k.ww, k.drop, leftoverMark)
}

// hostileScript is the hostile job of runID; drop is the drop box. The
// daemon's name is split in the script (as in jobPrologue), so that only the
// daemon's command line, not this job's, holds it whole.
func hostileScript(runID string, k hostileKit) string {
	return fmt.Sprintf(`run=%q drop=%q hj=%q ww=%q
root=$(readlink "/proc/$PPID/cwd")
echo "$run" >"$ww/ghr-hostile-$run"
echo "$run" >"$ww/deep/ghr-hostile-$run"
"$hj" plant-ipc "$run" || echo "hostilejob plant-ipc failed"
mkdir -p "$drop/$run.thread" && chmod 777 "$drop/$run.thread"
echo "GHR_HOSTILE=$run" >>"$root/.env"
echo "$run" >~/.ghr-hostile-"$run"
echo "$run" >/tmp/ghr-hostile-"$run"
echo "$run" >/dev/shm/ghr-hostile-"$run"
work=$(cd ../.. && pwd)
setsid bash -c 'trap "" INT TERM HUP
while :; do
	for f in $(find "$1" -name "ghr-ws-*" 2>/dev/null); do
		case "$f" in *"ghr-ws-$2") ;; *) echo "$2 saw $f" >>"$3/$2.seen" ;; esac
	done
	sleep 0.3
done' "ghr-hostile""-daemon-$run" "$work" "$run" "$drop" </dev/null >/dev/null 2>&1 &
setsid "$hj" thread-daemon "$work" "$drop/$run.thread" </dev/null >/dev/null 2>&1 &
echo $! >"$drop/$run.thread/pid" # a later job of this run on a token runner may meet it
echo "hostile job of $run planted its leftovers (runner root $root)"
`, runID, k.drop, k.hj, k.ww)
}

// hostileKit is what hostile jobs use: the drop box, writable by every
// runner user, where their daemons report; ww, a folder of root's in /tmp,
// world-writable with a world-writable "deep" in it (as systemd-tmpfiles
// makes /tmp/.X11-unix); hj, internal/testenv/hostilejob.
type hostileKit struct{ drop, ww, hj string }

// newHostileKit makes the kit under dir (ww in /tmp, where the agents'
// wipe looks); done removes ww.
func newHostileKit(dir string) (k hostileKit, done func(), err error) {
	// Absolute: jobs run in their own folders, and the command's default
	// -dir (.sandbox) is relative (make chaos's jobs wrote their drop
	// files, and hostile daemons their reports, where nobody looked).
	if dir, err = filepath.Abs(dir); err != nil {
		return k, nil, err
	}
	k.drop = filepath.Join(dir, "hostile-drop")
	k.ww = filepath.Join("/tmp", fmt.Sprintf("ghr-chaos-ww-%d", os.Getpid()))
	for _, d := range []string{k.drop, k.ww, filepath.Join(k.ww, "deep")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return k, nil, err
		}
		if err := os.Chmod(d, 0o1777); err != nil {
			return k, nil, err
		}
	}
	if k.hj, err = testbin.Build(testbin.Module + "/internal/testenv/hostilejob"); err != nil {
		return k, nil, err
	}
	return k, func() { os.RemoveAll(k.ww) }, nil
}

// checkHostile returns the violations of invariant 8: a job found another
// run's leftovers, or a hostile daemon saw another run's workspace.
func (c *chaos) checkHostile() []string {
	var v []string
	c.mu.Lock()
	for _, use := range c.jobUses {
		if i := strings.Index(use.job.Output, leftoverMark); i >= 0 {
			line, _, _ := strings.Cut(use.job.Output[i:], "\n")
			v = append(v, fmt.Sprintf("[8] job %d of %s on %s found another run's leftovers: %s", use.job.ID, use.run, use.job.Runner, line))
		}
	}
	c.mu.Unlock()
	threads, _ := filepath.Glob(filepath.Join(c.hostile.drop, "*.thread", "spy"))
	for _, f := range threads {
		run := strings.TrimSuffix(filepath.Base(filepath.Dir(f)), ".thread")
		raw, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.Contains(line, "ghr-ws-") && !strings.HasSuffix(line, "ghr-ws-"+run) {
				v = append(v, fmt.Sprintf("[8] a hostile job's thread daemon (State Z, threads alive) outlived its run %s: it saw %s", run, line))
				break
			}
		}
	}
	seen, _ := filepath.Glob(filepath.Join(c.hostile.drop, "*.seen"))
	sort.Strings(seen)
	for _, f := range seen {
		raw, _ := os.ReadFile(f)
		first, _, _ := strings.Cut(string(raw), "\n")
		v = append(v, fmt.Sprintf("[8] a hostile job's daemon outlived its run: %s", first))
	}
	return v
}
