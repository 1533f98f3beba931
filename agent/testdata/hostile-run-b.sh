# Run B's job on the instance run A's hostile job used (see hostile-run-a.sh
# for the variables): nothing of A may be left, in its environment, its
# processes or its files. It leaves a marker in its workspace that a
# surviving spy would list, and waits long enough for it to look.
fail=0
left() { echo "LEFT $*"; fail=1; }
[ -z "${GHR_FROM_A:-}" ] || left "GHR_FROM_A=$GHR_FROM_A in the environment"
[ -z "${NODE_OPTIONS:-}" ] || left "NODE_OPTIONS=$NODE_OPTIONS in the environment"
grep -q GHR_FROM_A "$R/.env" 2>/dev/null && left "A's line in this run's .env"
for p in /proc/[0-9]*; do
	[ "$(stat -c %u "$p" 2>/dev/null)" = "$(id -u)" ] || continue
	case "$(tr "\0" " " <"$p/cmdline" 2>/dev/null)" in
	*"ghr-daemon-$TAG"* | *"ghr-nohup-$TAG"*) left "process $(basename "$p"): $(tr "\0" " " <"$p/cmdline")" ;;
	esac
done
# A thread group of ours whose leader is a zombie but whose threads live.
for p in /proc/[0-9]*; do
	[ "$(stat -c %u "$p" 2>/dev/null)" = "$(id -u)" ] || continue
	if grep -q '^State:.*Z' "$p/status" 2>/dev/null && [ "$(ls "$p/task" 2>/dev/null | wc -l)" -gt 1 ]; then
		left "thread group $(basename "$p") with a zombie leader and live threads"
	fi
done
ipc=$("$HJ" probe-ipc) && [ -z "$ipc" ] || left "IPC objects or keys: $ipc"
for f in "${RUNNER_TOOL_CACHE:-/nonexistent}/node" "$WW/ghr-a-$TAG" "$WW/deep/ghr-a-$TAG" ~/.gitconfig ~/.ssh "$W/planted-link" "/tmp/ghr-link-$TAG" "/tmp/ghr-a-$TAG" "/var/tmp/ghr-a-$TAG" "/dev/shm/ghr-a-$TAG"; do
	if [ -e "$f" ] || [ -L "$f" ]; then left "$f"; fi
done
touch "run-b-marker-$TAG"
sleep 1
exit $fail
