package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Hostile jobs in the chaos suite (invariant 8). A workflow that draws
// faultHostileJob runs, as its first job, a job that tries to persist on
// its instance: a line in the runner's .env (the listener loads it into
// every later job), a setsid daemon deaf to the stop signals, files in the
// home, /tmp and /dev/shm. Every chaos job first looks for what such a job
// of another run left on its instance and fails saying so; the daemon
// reports, into a drop box no cleanup touches, any other run's workspace it
// sees. The runners run as a user of their instance's own (instancehost's
// RunnerUsers), so "its own" means what this instance's runner user owns.

const faultHostileJob = "a hostile job: .env line, setsid daemon, home and /tmp files"

// leftoverMark starts the line a job prints when it finds another run's
// leftovers.
const leftoverMark = "HOSTILE LEFTOVER"

// jobPrologue is what every chaos job runs first: it fails the job when
// anything a hostile job of another run planted is still there, and marks
// the job's workspace with its run for a surviving spy to find.
func jobPrologue(runID string) string {
	return fmt.Sprintf(`run=%q
me=$(id -u)
found=""
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
`, runID, leftoverMark)
}

// hostileScript is the hostile job of runID; drop is the drop box. The
// daemon's name is split in the script (as in jobPrologue), so that only the
// daemon's command line, not this job's, holds it whole.
func hostileScript(runID, drop string) string {
	return fmt.Sprintf(`run=%q drop=%q
root=$(readlink "/proc/$PPID/cwd")
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
echo "hostile job of $run planted its leftovers (runner root $root)"
`, runID, drop)
}

// hostileDrop makes the drop box, writable by every runner user.
func hostileDrop(dir string) (string, error) {
	drop := filepath.Join(dir, "hostile-drop")
	if err := os.MkdirAll(drop, 0o755); err != nil {
		return "", err
	}
	return drop, os.Chmod(drop, 0o1777)
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
	seen, _ := filepath.Glob(filepath.Join(c.drop, "*.seen"))
	sort.Strings(seen)
	for _, f := range seen {
		raw, _ := os.ReadFile(f)
		first, _, _ := strings.Cut(string(raw), "\n")
		v = append(v, fmt.Sprintf("[8] a hostile job's daemon outlived its run: %s", first))
	}
	return v
}
