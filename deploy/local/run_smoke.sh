#!/usr/bin/env bash
# deploy/local/run_smoke.sh: the smoke check of `make run`. It runs deploy/local/run.sh
# for SMOKE_DURATION seconds (RUN_DURATION; default 40) with configs/sluice.local.yaml,
# samples the running stack shortly before the end, and checks:
#
#   1. throttling: ingest answered 429 (sluice_http_requests_total{code="429"} > 0),
#      and demoload counted 429s for acme (30/s offered, gcra admits 20/s);
#   2. deliveries: the demo sink received jobs of every tenant, and over its last 10 s
#      acme and globex arrived at their configured outflow (5/s and 2/s, within ±20%:
#      both have a backlog by then, so the drainers are busy at exactly that rate);
#   3. the operator's view: `sluicectl top` shows a row per tenant, and `sluicectl stats
#      acme` measures acme's outflow at its configured rate (±20%) across both drainers;
#   4. a clean stop: run.sh exits 0 and nothing listens on its ports afterwards.
#
# Needs the local services (make services); exit 0 when every check passed, 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
DURATION=${SMOKE_DURATION:-40}
OUT=$ROOT/.cache/run/smoke
mkdir -p "$OUT"
rm -f "$OUT"/*

log() { echo "run_smoke: $*" >&2; }
failed=0
check() { # check OK DESCRIPTION
	if [[ $1 == 1 ]]; then
		log "ok    $2"
	else
		log "FAIL  $2"
		failed=1
	fi
}

((DURATION >= 20)) || {
	log "SMOKE_DURATION must be at least 20 s (the sink's rate window is 10 s)"
	exit 1
}

RUN_DURATION=$DURATION RUN_FOLLOW=none RUN_CONFIG=configs/sluice.local.yaml \
	bash deploy/local/run.sh >"$OUT/run.out" 2>&1 &
run_pid=$!
trap 'kill -TERM $run_pid 2>/dev/null || true; wait $run_pid 2>/dev/null || true' EXIT

# Wait for the stack (building the binaries may take minutes on a busy machine).
for ((i = 0; i < 600; i++)); do
	grep -q 'the sluice local stack is up' "$OUT/run.out" && break
	kill -0 "$run_pid" 2>/dev/null || break
	sleep 0.5
done
if ! grep -q 'the sluice local stack is up' "$OUT/run.out"; then
	cat "$OUT/run.out" >&2
	log "FAIL  the stack did not come up"
	exit 1
fi
log "stack up; sampling in $((DURATION - 5)) s"
sleep $((DURATION - 5))
curl -fsS --max-time 2 http://127.0.0.1:9000/stats >"$OUT/sink.json" || true
curl -fsS --max-time 2 http://127.0.0.1:8080/metrics >"$OUT/ingest.metrics" || true
CTL=(.cache/bin/sluicectl --admin-token "${RUN_ADMIN_TOKEN:-local-admin}")
"${CTL[@]}" top --frames 1 >"$OUT/top.txt" 2>&1 || true
"${CTL[@]}" stats acme --json >"$OUT/stats-acme.json" 2>&1 || true
curl -fsS --max-time 2 http://127.0.0.1:8080/ui/ >"$OUT/console.html" || true
curl -fsS --max-time 2 -H "Authorization: Bearer ${RUN_ADMIN_TOKEN:-local-admin}" \
	http://127.0.0.1:8080/admin/v1/overview >"$OUT/overview.json" || true

code=0
wait "$run_pid" || code=$?
trap - EXIT
cp .cache/run/logs/demoload.log "$OUT/demoload.log" 2>/dev/null || true

# 1. Throttling.
n429=$(awk '/^sluice_http_requests_total\{/ && /code="429"/ {s += $NF} END {print s + 0}' "$OUT/ingest.metrics")
check "$( ((n429 > 0)) && echo 1)" "ingest answered 429 ($n429 times)"
acme_throttled=$(sed -n 's/^total acme: .*throttled=\([0-9]*\).*/\1/p' "$OUT/demoload.log")
check "$( ((${acme_throttled:-0} > 0)) && echo 1)" "demoload counted 429s for acme (${acme_throttled:-none})"

# 2. Deliveries. tenant_field TENANT FIELD: a number of the sink's per-tenant stats.
tenant_field() {
	grep -o "\"$1\":{[^}]*}" "$OUT/sink.json" | grep -o "\"$2\":[0-9.e+-]*" | cut -d: -f2
}
for t in acme globex initech; do
	got=$(tenant_field "$t" received)
	check "$( ((${got:-0} > 0)) && echo 1)" "the demo sink received $t's jobs (${got:-none})"
done
# within VALUE LOW HIGH
within() { awk -v v="${1:-0}" -v lo="$2" -v hi="$3" 'BEGIN {exit !(v >= lo && v <= hi)}'; }
for spec in acme:5 globex:2; do
	t=${spec%:*} want=${spec#*:}
	got=$(tenant_field "$t" rate)
	lo=$(awk -v w="$want" 'BEGIN {print w * 0.8}') hi=$(awk -v w="$want" 'BEGIN {print w * 1.2}')
	check "$(within "$got" "$lo" "$hi" && echo 1)" "$t delivered at ${got:-?}/s over the last 10 s (configured $want/s, want $lo..$hi)"
done

# 3. The operator's view.
rows=0
for t in acme globex initech; do
	grep -Eq "^$t +[0-9]+ " "$OUT/top.txt" && rows=$((rows + 1))
done
check "$( ((rows == 3)) && echo 1)" "sluicectl top shows a row for each of the 3 tenants ($rows)"
measured=$(grep -o '"measured_rate": *[0-9.e+-]*' "$OUT/stats-acme.json" | grep -o '[0-9.e+-]*$')
check "$(within "$measured" 4 6 && echo 1)" "sluicectl stats acme: measured outflow ${measured:-?}/s across the drainers (configured 5/s, want 4..6)"
check "$(grep -q '<title>sluice' "$OUT/console.html" && echo 1)" "the web console is served at http://127.0.0.1:8080/ui/"
orows=$(grep -o '"tenant":"[a-z]*"' "$OUT/overview.json" | sort -u | wc -l)
check "$( ((orows == 3)) && echo 1)" "GET /admin/v1/overview lists the 3 tenants ($orows)"

# 4. Clean stop.
check "$( ((code == 0)) && echo 1)" "run.sh exited $code"
busy=''
for port in 8080 8081 8082 9000; do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && busy+=" $port"
done
check "$([[ -z $busy ]] && echo 1)" "nothing listens on 8080 8081 8082 9000 after the stop${busy:+ (still:$busy)}"

if ((failed)); then
	log "failed; run.sh's output is in $OUT/run.out, samples in $OUT"
	exit 1
fi
log "passed"
