#!/usr/bin/env bash
# deploy/local/run.sh: build and run sluice's services against the local servers
# (make run starts those first), each with --config "$RUN_CONFIG", its output in
# .cache/run/logs/<name>.log and followed here. Ctrl-C (or SIGTERM) stops them
# with SIGTERM, so they shut down gracefully; the local servers stay up.
#
#   RUN_CONFIG=configs/sluice.local.yaml RUN_CMDS="ingest drainer" bash deploy/local/run.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
CONFIG=${RUN_CONFIG:-configs/sluice.local.yaml}
read -r -a CMDS <<<"${RUN_CMDS:-ingest drainer}"
LOGS=$ROOT/.cache/run/logs

[[ -f $CONFIG ]] || {
	echo "run: config $CONFIG not found (set RUN_CONFIG)" >&2
	exit 1
}
mkdir -p bin "$LOGS"
for name in "${CMDS[@]}"; do
	go build -o "bin/$name" "./cmd/$name"
done

pids=() logs=() tail_pid=''
stop() {
	trap - INT TERM EXIT
	echo "run: stopping ${CMDS[*]}" >&2
	for pid in "${pids[@]}" $tail_pid; do kill -TERM "$pid" 2>/dev/null || true; done
	wait || true
}
trap stop INT TERM EXIT

for name in "${CMDS[@]}"; do
	"bin/$name" --config "$CONFIG" >>"$LOGS/$name.log" 2>&1 &
	pids+=("$!")
	logs+=("$LOGS/$name.log")
	echo "run: $name pid $! (log $LOGS/$name.log)" >&2
done
# Follow the logs until a service exits or Ctrl-C.
tail -n 0 -F "${logs[@]}" 2>/dev/null &
tail_pid=$!
wait -n "${pids[@]}" || true
echo "run: a service exited; see $LOGS" >&2
