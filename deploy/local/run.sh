#!/usr/bin/env bash
# deploy/local/run.sh: the local demo stack of `make run`, without Docker, on 127.0.0.1:
#
#   Redis, Redis Cluster, Kafka  deploy/local/services.sh up (left running afterwards)
#   demosink   :9000   the demo downstream; GET /stats counts jobs per tenant
#   ingest     :8080   the job API and the admin API, with RUN_CONFIG
#   drainer-1  :8081   drainers (ops endpoints /metrics, /readyz); the second one
#   drainer-2  :8082   gets SLUICE_DRAINER_LISTEN, which overrides drainer.listen
#   prometheus :9090   when Debian's package is installed (apt-get install prometheus)
#   demoload           a steady load (cmd/demoload) that the config throttles
#
# Binaries are built into .cache/bin, logs go to .cache/run/logs/<name>.log, and the
# demo load's per-second counts are followed here. Ctrl-C (or SIGTERM) stops them in
# order with SIGTERM, so each shuts down gracefully: demoload, ingest, the drainers,
# demosink, prometheus; the local servers stay up.
#
# Environment (defaults in brackets):
#   RUN_CONFIG [configs/sluice.local.yaml]
#   RUN_DURATION [0]        seconds to run once everything is up, then stop (0: until Ctrl-C)
#   RUN_LOAD [demoload's default: acme 30/s, globex 10/s, initech 8/s]
#                           demoload --load, name:key:jobs_per_second[:type],...
#   RUN_LOAD_DURATION [10m] how long demoload sends
#   RUN_FRESH [1]           1: delete the config tenants' Redis keys (queues, backlogs, water
#                           levels, runtime changes) first, so each run starts from empty
#   RUN_SERVICES [1]        0: do not run services.sh up (they are up already)
#   RUN_FOLLOW [demoload]   log followed on the terminal: demoload, all, or none
#   RUN_PROMETHEUS [prometheus]  the Prometheus binary; off: do not start one
#   RUN_ADMIN_TOKEN [local-admin]  the config's admin token, shown in the hints
#   SLUICE_DRAINER_LISTEN [127.0.0.1:8082]  the second drainer's ops address
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
CONFIG=${RUN_CONFIG:-configs/sluice.local.yaml}
DURATION=${RUN_DURATION:-0}
LOAD=${RUN_LOAD:-}
LOAD_DURATION=${RUN_LOAD_DURATION:-10m}
FRESH=${RUN_FRESH:-1}
FOLLOW=${RUN_FOLLOW:-demoload}
ADMIN_TOKEN=${RUN_ADMIN_TOKEN:-local-admin}
PROMETHEUS=${RUN_PROMETHEUS:-prometheus}
BIN=$ROOT/.cache/bin
LOGS=$ROOT/.cache/run/logs
INGEST=127.0.0.1:8080
DRAINER1=127.0.0.1:8081
DRAINER2=${SLUICE_DRAINER_LISTEN:-127.0.0.1:8082}
SINK=127.0.0.1:9000
PROM=127.0.0.1:9090
REDIS_PORT=${SLUICE_REDIS_PORT:-6379}

log() { echo "run: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[[ -f $CONFIG ]] || die "config $CONFIG not found (set RUN_CONFIG)"
[[ $DURATION =~ ^[0-9]+$ ]] || die "RUN_DURATION must be whole seconds (got '$DURATION')"
command -v curl >/dev/null || die "curl is needed (apt-get install curl)"

# port_open HOST:PORT: something accepts TCP connections there.
port_open() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }

for addr in "$INGEST" "$DRAINER1" "$DRAINER2" "$SINK"; do
	port_open "$addr" && die "$addr is taken (another make run, or a service of yours?); see: ss -ltnp | grep ${addr##*:}"
done

if [[ ${RUN_SERVICES:-1} == 1 ]]; then
	bash deploy/local/services.sh up
fi

mkdir -p "$BIN" "$LOGS"
log "building ingest drainer demosink demoload sluicectl into $BIN (the first build compiles the dependencies: a minute or two)"
n=0
for cmd in ingest drainer demosink demoload sluicectl; do
	n=$((n + 1))
	t0=$SECONDS
	go build -o "$BIN/$cmd" "./cmd/$cmd"
	log "built $cmd ($n of 5) in $((SECONDS - t0)) s"
done

# config_tenants: the tenant ids of the config, the keys two spaces under "tenants:".
config_tenants() {
	awk '/^tenants:/ {in_t=1; next} /^[^ #]/ {in_t=0}
		in_t && /^  [A-Za-z0-9._-]+:/ {sub(/^  /, ""); sub(/:.*/, ""); print}' "$CONFIG"
}

if [[ $FRESH == 1 ]]; then
	# One SCAN per tenant and one UNLINK per 1,000 keys (not one redis-cli per
	# key, which took ~50 s after a long demo).
	for t in $(config_tenants); do
		redis-cli -h 127.0.0.1 -p "$REDIS_PORT" --scan --pattern "sluice:{$t}:*" >"$LOGS/fresh-keys"
		xargs -r -d '\n' -n 1000 redis-cli -h 127.0.0.1 -p "$REDIS_PORT" unlink <"$LOGS/fresh-keys" >/dev/null
		n=$(wc -l <"$LOGS/fresh-keys")
		log "fresh start: deleted $n Redis keys of tenant $t"
	done
fi

names=() pids=()
stopping=0
# start NAME CMD...: run CMD in the background in a session of its own (setsid, which
# execs in place here), so a Ctrl-C reaches this script only and it stops everything
# in order; the output goes to NAME's log.
start() {
	local name=$1
	shift
	: >"$LOGS/$name.log"
	setsid "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	names+=("$name")
	pids+=("$!")
	log "$name: pid $! (log .cache/run/logs/$name.log)"
}

# stop_all: SIGTERM in the order below, each waited for up to 15 s, then SIGKILL.
stop_all() {
	local order=(demoload ingest drainer-1 drainer-2 demosink prometheus follow) name i pid k
	[[ $stopping == 1 ]] && return 0
	stopping=1
	# A second Ctrl-C must not leave the services running on their own.
	trap 'log "stopping already, each service within 15 s"' INT TERM
	if pid_by_name demosink >/dev/null; then
		# The sink's counts before anything stops: per tenant, received and rate over 10 s.
		curl -fsS --max-time 2 "http://$SINK/stats" >"$LOGS/demosink-final.json" 2>/dev/null || true
	fi
	log "stopping: ${order[*]}"
	for name in "${order[@]}"; do
		pid=$(pid_by_name "$name") || continue
		kill -TERM "$pid" 2>/dev/null || continue
		for ((k = 0; k < 150; k++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "$name: still running 15 s after SIGTERM, sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
		wait "$pid" 2>/dev/null || true
	done
	if [[ -s $LOGS/demosink-final.json ]]; then
		log "demo sink received: $(cat "$LOGS/demosink-final.json")"
	fi
	if [[ $FOLLOW != demoload ]]; then
		grep -h '^total ' "$LOGS/demoload.log" 2>/dev/null | sed 's/^/run: demoload /' >&2 || true
	fi
	log "stopped; logs in .cache/run/logs"
}

pid_by_name() {
	local i
	for i in "${!names[@]}"; do
		if [[ ${names[$i]} == "$1" ]]; then
			echo "${pids[$i]}"
			return 0
		fi
	done
	return 1
}

trap 'stop_all; exit 0' INT TERM
trap 'stop_all' EXIT

# wait_ready NAME URL: until URL answers 2xx, at most 30 s; fails when NAME exited.
wait_ready() {
	local name=$1 url=$2 pid k
	pid=$(pid_by_name "$name")
	for ((k = 0; k < 300; k++)); do
		curl -fsS -o /dev/null --max-time 1 "$url" 2>/dev/null && return 0
		if ! kill -0 "$pid" 2>/dev/null; then
			tail -n 20 "$LOGS/$name.log" >&2
			die "$name exited while starting; see .cache/run/logs/$name.log"
		fi
		sleep 0.1
	done
	tail -n 20 "$LOGS/$name.log" >&2
	die "$name: $url not ready after 30 s"
}

start demosink "$BIN/demosink" --listen "$SINK"
wait_ready demosink "http://$SINK/stats"
start ingest "$BIN/ingest" --config "$CONFIG"
start drainer-1 env SLUICE_DRAINER_LISTEN="$DRAINER1" "$BIN/drainer" --config "$CONFIG"
start drainer-2 env SLUICE_DRAINER_LISTEN="$DRAINER2" "$BIN/drainer" --config "$CONFIG"
wait_ready ingest "http://$INGEST/readyz"
wait_ready drainer-1 "http://$DRAINER1/readyz"
wait_ready drainer-2 "http://$DRAINER2/readyz"

prom_line="not installed; for graphs: apt-get install prometheus (Debian's package), then make run again"
if [[ $PROMETHEUS == off ]]; then
	prom_line="not started (RUN_PROMETHEUS=off)"
elif command -v "$PROMETHEUS" >/dev/null; then
	if port_open "$PROM"; then
		prom_line="$PROM is taken by another process; not started"
	else
		mkdir -p "$ROOT/.cache/prometheus"
		start prometheus "$PROMETHEUS" --config.file="$ROOT/deploy/prometheus/prometheus.yml" \
			--storage.tsdb.path="$ROOT/.cache/prometheus" --web.listen-address="$PROM"
		prom_line="http://$PROM  (e.g. sum by (tenant, result) (rate(sluice_admission_decisions_total[1m])))"
	fi
fi

load_args=(--url "http://$INGEST" --duration "$LOAD_DURATION")
[[ -n $LOAD ]] && load_args+=(--load "$LOAD")
start demoload "$BIN/demoload" "${load_args[@]}"

ctl=".cache/bin/sluicectl"
# The queue backend of the config (queue.backend; SLUICE_QUEUE_BACKEND wins, as in the services).
backend=${SLUICE_QUEUE_BACKEND:-$(awk '/^queue:/ {q=1; next} /^[^ #]/ {q=0} q && /^  backend:/ {print $2}' "$CONFIG")}
cat >&2 <<EOF

run: the sluice local stack is up ($CONFIG, queue backend ${backend:-redis})
  ingest      http://$INGEST      POST /v1/jobs, /admin/v1/tenants, /readyz, /metrics
  console     http://$INGEST/ui/  the web console (sign in with the admin token $ADMIN_TOKEN)
  drainers    http://$DRAINER1/metrics   http://$DRAINER2/metrics
  demo sink   http://$SINK/stats  jobs received per tenant, rate over the last 10 s
  prometheus  $prom_line
  load        demoload for $LOAD_DURATION, its per-second counts follow (ok = 202, 429 = throttled)

  live view   $ctl --admin-token $ADMIN_TOKEN top
  one tenant  $ctl --admin-token $ADMIN_TOKEN stats acme
  change      $ctl --admin-token $ADMIN_TOKEN tenants set acme --rate 20 --capacity 20
  pause       $ctl --admin-token $ADMIN_TOKEN pause acme   (resume acme)
  dead jobs   $ctl --admin-token $ADMIN_TOKEN dlq list acme
  submit      $ctl --key acme-local-key submit --type email --payload '{"to":"a@example.com"}'
  logs        .cache/run/logs/{ingest,drainer-1,drainer-2,demosink,demoload,prometheus}.log

  Ctrl-C stops everything$( ((DURATION > 0)) && echo "; stopping by itself in $DURATION s (RUN_DURATION)").

EOF

# follow FILES...: tail them here, in a session of its own like the services.
follow() {
	setsid tail -n +1 -F "$@" 2>/dev/null </dev/null &
	names+=(follow)
	pids+=("$!")
}
case $FOLLOW in
demoload) follow "$LOGS/demoload.log" ;;
all) follow "$LOGS"/*.log ;;
none) ;;
*) log "RUN_FOLLOW=$FOLLOW: want demoload, all or none; following nothing" ;;
esac

# Run until Ctrl-C, RUN_DURATION, or a service exits (demoload ending is normal).
started=$SECONDS
while :; do
	if ((DURATION > 0 && SECONDS - started >= DURATION)); then
		log "RUN_DURATION=$DURATION s is over"
		break
	fi
	for name in demosink ingest drainer-1 drainer-2; do
		pid=$(pid_by_name "$name")
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid" && code=0 || code=$?
			log "$name exited (status $code); its last lines:"
			tail -n 20 "$LOGS/$name.log" >&2
			stop_all
			exit 1
		fi
	done
	sleep 1
done
stop_all
exit 0
