#!/usr/bin/env bash
# deploy/bench/kafka-perf.sh: sluice's Kafka enqueue throughput next to Kafka's own
# producer benchmark (kafka-producer-perf-test, class
# org.apache.kafka.tools.ProducerPerformance from the kafka-tools jar of the same
# Kafka release), against the same broker, in one invocation.
#
#   bash deploy/bench/kafka-perf.sh            # 50000 records, 12 partitions
#   RECORDS=200000 PARTITIONS=24 bash deploy/bench/kafka-perf.sh
#
# Both sides write RECORDS records to a fresh topic of PARTITIONS partitions
# (replication 1, the local broker) with acks=all and the same record value size:
#
#   sluice   go test -bench 'BenchmarkEnqueue/kafka(_no_state)?' -benchtime=<RECORDS>x ./queue/kafkaq:
#            kafkaq.Producer.Enqueue of one job per call (a 1 KiB payload in its
#            JSON envelope) from many goroutines, each waiting for its ack and
#            then for the post-ack Redis write (the tenant's backlog counter and
#            the job's state "queued"), as ingest does per request. Then the same
#            producer without Redis (BenchmarkEnqueue/kafka_no_state: the
#            produce path alone), so the report shows what the post-ack write
#            costs; the goal is judged on the first.
#   kafka    ProducerPerformance --num-records <RECORDS> --record-size <the size of
#            sluice's envelope> --throughput -1 --producer-props acks=all, keys over
#            TENANTS values (as sluice keys by tenant); the Java client pipelines
#            asynchronously with its defaults (linger.ms=5, batch.size=16384).
#
# The script prints records/s, MB/s (2^20 bytes of record values) and p99 latency of
# each (sluice: of one Enqueue call, its ack and post-ack write awaited) and
# exits non-zero when any part fails.
#
# Environment (defaults in brackets):
#   RECORDS [50000]  PARTITIONS [12]  TENANTS [64, sluice's tenants = Kafka's keys]
#   PARALLELISM [64, goroutines per CPU of the sluice benchmark]
#   SLUICE_TEST_KAFKA [127.0.0.1:9092]  SLUICE_TEST_REDIS [127.0.0.1:6379]
#   SLUICE_KAFKA_VERSION [4.4.0]  SLUICE_CACHE_DIR [<repo>/.cache]
#
# The jars are the ones deploy/local/services.sh caches in .cache/kafka/<version>/libs;
# kafka-tools (not a dependency of the broker) is fetched once with mvn into
# .cache/kafka/<version>/tools. Start the servers first: bash deploy/local/services.sh up
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${SLUICE_CACHE_DIR:-$ROOT/.cache}
KAFKA_VERSION=${SLUICE_KAFKA_VERSION:-4.4.0}
LIBS=$CACHE/kafka/$KAFKA_VERSION/libs
TOOLS=$CACHE/kafka/$KAFKA_VERSION/tools
BROKER=${SLUICE_TEST_KAFKA:-127.0.0.1:9092}
BROKER=${BROKER%%,*}
RECORDS=${RECORDS:-50000}
PARTITIONS=${PARTITIONS:-12}
TENANTS=${TENANTS:-64}
PARALLELISM=${PARALLELISM:-64}
LOG4J=$ROOT/deploy/local/kafka/log4j2.properties

log() { echo "kafka-perf: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

[[ -d $LIBS ]] || die "no Kafka jars in $LIBS; run bash deploy/local/services.sh up first"
(exec 3<>"/dev/tcp/${BROKER%:*}/${BROKER##*:}") 2>/dev/null || die "no broker at $BROKER; run bash deploy/local/services.sh up"

tools_jar=$TOOLS/kafka-tools-$KAFKA_VERSION.jar
if [[ ! -f $tools_jar ]]; then
	log "fetching org.apache.kafka:kafka-tools:$KAFKA_VERSION into $TOOLS"
	mkdir -p "$TOOLS"
	(cd "$TOOLS" && mvn -q dependency:copy -Dartifact="org.apache.kafka:kafka-tools:$KAFKA_VERSION" \
		-DoutputDirectory="$TOOLS") || die "mvn could not fetch kafka-tools $KAFKA_VERSION"
fi
CP="$LIBS/*:$tools_jar"
java_tool() { java -Dlog4j2.configurationFile="$LOG4J" -cp "$CP" "$@"; }

# ---------------------------------------------------------------- sluice

log "sluice: BenchmarkEnqueue/kafka and kafka_no_state, $RECORDS jobs each, $PARTITIONS partitions, $TENANTS tenants"
bench_out=$(mktemp)
topic=""
cleanup() {
	rm -f "$bench_out"
	if [[ -n $topic ]]; then
		java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BROKER" --delete --topic "$topic" >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT

if ! (cd "$ROOT" && SLUICE_TEST_KAFKA=$BROKER SLUICE_BENCH_PARTITIONS=$PARTITIONS \
	SLUICE_BENCH_TENANTS=$TENANTS SLUICE_BENCH_PARALLELISM=$PARALLELISM \
	go test -run '^$' -bench '^BenchmarkEnqueue$/^kafka(_no_state)?$' -benchtime="${RECORDS}x" -count=1 ./queue/kafkaq/) >"$bench_out" 2>&1; then
	cat "$bench_out" >&2
	die "the sluice benchmark failed"
fi
# go test names a sub-benchmark <name>-<GOMAXPROCS>, or <name> alone when
# GOMAXPROCS is 1; either is followed by blanks.
line=$(grep -E '^BenchmarkEnqueue/kafka(-[0-9]+)?[[:space:]]' "$bench_out" | tail -1 || true)
bare=$(grep -E '^BenchmarkEnqueue/kafka_no_state(-[0-9]+)?[[:space:]]' "$bench_out" | tail -1 || true)
metric() { awk -v unit="$2" '{for (i = 2; i <= NF; i++) if ($i == unit) print $(i - 1)}' <<<"$1"; }
sluice_rps=$(metric "$line" jobs/s)
value_bytes=$(metric "$line" value_bytes)
per_request=$(metric "$line" jobs/request)
sluice_p99=$(metric "$line" p99_ms)
bare_rps=$(metric "$bare" jobs/s)
bare_per_request=$(metric "$bare" jobs/request)
bare_p99=$(metric "$bare" p99_ms)
[[ -n $sluice_rps && -n $value_bytes && -n $bare_rps ]] || {
	cat "$bench_out" >&2
	die "no jobs/s or value_bytes in the benchmark output (both sub-benchmarks)"
}
log "sluice: $line"
log "sluice: $bare"

# ---------------------------------------------------------------- Kafka's own tool

topic=perf-$(date +%s)-$RANDOM
java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$BROKER" --create --topic "$topic" \
	--partitions "$PARTITIONS" --replication-factor 1 >/dev/null || die "could not create topic $topic"
log "kafka: ProducerPerformance, $RECORDS records of $value_bytes bytes to $topic"
perf_out=$(java_tool org.apache.kafka.tools.ProducerPerformance --topic "$topic" \
	--num-records "$RECORDS" --record-size "$value_bytes" --throughput -1 \
	--key-distribution range --record-key-range "$TENANTS" \
	--producer-props bootstrap.servers="$BROKER" acks=all 2>&1) || {
	echo "$perf_out" >&2
	die "ProducerPerformance failed"
}
summary=$(grep -E "^$RECORDS records sent" <<<"$perf_out" | tail -1)
[[ -n $summary ]] || {
	echo "$perf_out" >&2
	die "no summary line in the ProducerPerformance output"
}
log "kafka: $summary"
kafka_rps=$(sed -E 's/^[0-9]+ records sent, ([0-9.]+) records\/sec.*/\1/' <<<"$summary")
kafka_lat=$(sed -E 's/.* ([0-9.]+) ms avg latency.*/\1/' <<<"$summary")
kafka_p99=$(sed -E 's/.* ([0-9.]+) ms 99th.*/\1/' <<<"$summary")

# ---------------------------------------------------------------- side by side

awk -v s="$sluice_rps" -v bs="$bare_rps" -v br="${bare_per_request:-?}" -v bp="${bare_p99:-?}" -v k="$kafka_rps" -v b="$value_bytes" -v n="$RECORDS" -v p="$PARTITIONS" \
	-v t="$TENANTS" -v r="${per_request:-?}" -v kl="$kafka_lat" -v sp="${sluice_p99:-?}" -v kp="${kafka_p99:-?}" 'BEGIN {
	printf "\n%d records of %d bytes, acks=all, %d partitions, %d keys (tenants), one broker\n", n, b, p, t
	printf "%-34s %12s %9s\n", "", "records/s", "MB/s"
	printf "%-34s %12.0f %9.2f   (%s jobs per produce request, p99 latency %s ms)\n", "sluice kafkaq.Producer.Enqueue", s, s * b / 1048576, r, sp
	printf "%-34s %12.0f %9.2f   (%s jobs per produce request, p99 latency %s ms)\n", "sluice-without-state-write", bs, bs * b / 1048576, br, bp
	printf "%-34s %12.0f %9.2f   (avg latency %s ms, p99 latency %s ms)\n", "kafka-producer-perf-test", k, k * b / 1048576, kl, kp
	printf "%-34s %12.2f\n", "sluice / kafka", s / k
	printf "%-34s %12.2f\n", "without state write / kafka", bs / k
}'
