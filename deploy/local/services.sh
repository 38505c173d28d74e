#!/usr/bin/env bash
# deploy/local/services.sh: the real servers that sluice's tests and local runs use,
# without Docker, all on 127.0.0.1:
#
#   Redis          127.0.0.1:6379        standalone, append-only file (appendfsync everysec)
#   Redis Cluster  127.0.0.1:7000-7002   3 masters, no replicas (test data: a restarted node starts empty)
#   Kafka          127.0.0.1:9092        single KRaft node, broker+controller (controller 9093)
#                  127.0.0.1:9092-9094   with SLUICE_KAFKA_BROKERS=3: three combined broker+controller
#                                        nodes (controllers 9192-9194), one cluster, internal topics with
#                                        replication factor 3 (transaction state min ISR 2)
#
# Usage:
#   services.sh [up]          start whatever is not running yet and wait until it answers
#   services.sh down          stop what this script started (SIGTERM, then SIGKILL)
#   services.sh status        one line per service; exit 1 when one is not up
#   services.sh env           SLUICE_TEST_* lines for the tests (make test uses them)
#   services.sh clean         down, then remove the servers' data (keeps the jar cache)
#   services.sh tools         install the test-only tools (promtool, from Debian's prometheus;
#                             chromium, Debian's; Redocly's CLI, from npm)
#   services.sh redocly ARGS  run Redocly's CLI (installing it first when missing): make lint-api
#
#   services.sh kafka-start --dir D --port P --controller-port C
#                           [--node-id I --voters "1@127.0.0.1:C1,2@127.0.0.1:C2,..." --cluster-id ID]
#   services.sh kafka-stop  --dir D [--kill]
#   services.sh redis-start --dir D --port P
#   services.sh redis-stop  --dir D [--kill]
#       a private server in D for a test that stops, kills or restarts it
#       (internal/testenv StartKafka uses these). Starting again with the same D keeps
#       the data, as a real restart does. With --voters the node is node I of a static
#       KRaft quorum of combined broker+controller nodes (its --controller-port is its own
#       entry in the list); every node of one cluster is formatted with the same --cluster-id
#       (a 22-character Kafka Uuid; default: the one in D/cluster.id, else a new one). For
#       N >= 3 voters the internal topics get replication factor 3 (__consumer_offsets;
#       transaction and share state with min ISR 2) and default.replication.factor is 3;
#       min.insync.replicas stays the broker default (1): sluice sets it on its own topics
#       (kafka.min_insync_replicas), and tests create replication-factor-1 topics on it.
#       internal/testenv StartKafkaCluster uses these.
#
#   services.sh sentinel-start --dir D --primary-port P --replica-port R --sentinel-ports S1,S2,S3
#   services.sh sentinel-stop  --dir D [--kill]
#       a private replicated Redis in D (internal/testenv StartSentinel uses these): a
#       primary (D/primary, port P) and one replica of it (D/replica, port R), both with
#       the append-only file as above, and three Sentinels (D/sentinel-S, ports S1-S3)
#       monitoring it as master SLUICE_SENTINEL_MASTER with quorum 2,
#       down-after-milliseconds 1000 and failover-timeout 3000. Ready once every
#       Sentinel names the same master, knows the replica and the two other Sentinels
#       (SENTINEL CKQUORUM), and the replica's link to the master is up. Sentinels
#       rewrite D/sentinel-S/sentinel.conf after a failover; starting again with the
#       same D keeps those files and the data. sentinel-stop ends the Sentinels first.
#
# Environment (defaults in brackets):
#   SLUICE_REDIS_PORT [6379]  SLUICE_REDIS_CLUSTER_PORT [7000, uses it and the next two]
#   SLUICE_KAFKA_BROKERS [1; N, 1..9] N > 1: up/status/down/env handle N nodes on
#     SLUICE_KAFKA_PORT..+N-1 with controllers on SLUICE_KAFKA_CONTROLLER_PORT..+N-1 (default
#     SLUICE_KAFKA_PORT+100), data in <run>/kafka-cluster-<port>; env then prints every broker
#     in SLUICE_TEST_KAFKA. The same variable is config's override of kafka.brokers: a value
#     with ':' or ',' (a broker list) counts as 1 here, and make test runs the tests without it.
#   SLUICE_KAFKA_PORT [9092]  SLUICE_KAFKA_CONTROLLER_PORT [9093; 9192 when N > 1]
#   SLUICE_KAFKA_VERSION [4.4.0; a 4.x release]  SLUICE_LOG4J_VERSION [2.25.5, the log4j-api of that Kafka]
#   SLUICE_KAFKA_HEAP [-Xms256m -Xmx1g; -Xms128m -Xmx384m for a node of a cluster]
#   SLUICE_KAFKA_LOG_LEVEL [WARN]
#   SLUICE_KAFKA_JVM_OPTS [none; testenv passes -XX:TieredStopAtLevel=1, which starts
#     a broker ≈1-3 s faster on a busy 2-core machine but slows it at full load]
#   SLUICE_KAFKA_START_TIMEOUT [120 seconds]  SLUICE_CACHE_DIR [<repo>/.cache]
#   SLUICE_RUN_DIR [<cache>/run: the shared servers' data, pid files and logs]
#   SLUICE_REDOCLY_VERSION [2.77.0; npm @redocly/cli, an exact version]
#   SLUICE_SENTINEL_MASTER [sluice; the master name of sentinel-start]
#   SLUICE_SENTINEL_START_TIMEOUT [30 seconds; until the Sentinels agree and the replica syncs]
#
# Missing redis-server, java or mvn are installed with apt-get (root only). Kafka's
# jars come from Maven Central through deploy/local/kafka/pom.xml and are cached in
# .cache/kafka/<version>/libs; the broker's log is <dir>/broker.log
# (.cache/run/kafka-9092/broker.log for the shared one, kafka-cluster-909N for a cluster's). See docs/adr/0001-kafka-version.md.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${SLUICE_CACHE_DIR:-$ROOT/.cache}
HOST=127.0.0.1
REDIS_PORT=${SLUICE_REDIS_PORT:-6379}
CLUSTER_PORT=${SLUICE_REDIS_CLUSTER_PORT:-7000}
CLUSTER_PORTS=("$CLUSTER_PORT" "$((CLUSTER_PORT + 1))" "$((CLUSTER_PORT + 2))")
RUN=${SLUICE_RUN_DIR:-$CACHE/run}
KAFKA_PORT=${SLUICE_KAFKA_PORT:-9092}
KAFKA_BROKERS=${SLUICE_KAFKA_BROKERS:-1}
[[ $KAFKA_BROKERS == *[:,]* ]] && KAFKA_BROKERS=1 # config's broker list, not a count
[[ $KAFKA_BROKERS =~ ^[1-9]$ ]] || {
	echo "services: error: SLUICE_KAFKA_BROKERS must be a count, 1..9 (got '$KAFKA_BROKERS')" >&2
	exit 1
}
if ((KAFKA_BROKERS == 1)); then
	KAFKA_CONTROLLER_PORT=${SLUICE_KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
else
	KAFKA_CONTROLLER_PORT=${SLUICE_KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 100))}
fi
KAFKA_VERSION=${SLUICE_KAFKA_VERSION:-4.4.0}
LOG4J_VERSION=${SLUICE_LOG4J_VERSION:-2.25.5}
KAFKA_HEAP=${SLUICE_KAFKA_HEAP:-}
KAFKA_JVM_OPTS=${SLUICE_KAFKA_JVM_OPTS:-}
KAFKA_LOG_LEVEL=${SLUICE_KAFKA_LOG_LEVEL:-WARN}
KAFKA_START_TIMEOUT=${SLUICE_KAFKA_START_TIMEOUT:-120}
KAFKA_LIBS=$CACHE/kafka/$KAFKA_VERSION/libs
PROBE=$CACHE/bin/kafkaprobe
REDOCLY_VERSION=${SLUICE_REDOCLY_VERSION:-2.77.0}
REDOCLY_DIR=$CACHE/tools/redocly
SENTINEL_MASTER=${SLUICE_SENTINEL_MASTER:-sluice}
SENTINEL_START_TIMEOUT=${SLUICE_SENTINEL_START_TIMEOUT:-30}

log() { echo "services: $*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# ---------------------------------------------------------------- tools

APT_UPDATED=0
apt_install() {
	[[ $(id -u) == 0 ]] || die "missing $*; install it (apt-get install $*) or run this script as root"
	if [[ $APT_UPDATED == 0 ]]; then
		log "apt-get update"
		DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
		APT_UPDATED=1
	fi
	log "apt-get install $*"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

need_redis() {
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		apt_install redis-server redis-tools
	fi
}

need_java() {
	command -v java >/dev/null || apt_install openjdk-17-jre-headless
	local major
	major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -n1)
	[[ ${major:-0} -ge 17 ]] || die "Kafka $KAFKA_VERSION needs Java 17 or newer, found '${major:-unknown}'"
}

need_mvn() {
	command -v mvn >/dev/null || apt_install maven
}

# cmd_tools installs the test-only tools: promtool (Debian's package
# prometheus) checks deploy/prometheus's rules in the deploy tests; chromium
# (Debian's) runs the web console's browser test (internal/consoletest);
# Redocly's CLI (need_redocly) lints api/openapi.yaml in make lint-api.
cmd_tools() {
	command -v promtool >/dev/null || apt_install prometheus
	command -v chromium >/dev/null || apt_install chromium
	with_lock redocly need_redocly
}

# need_redocly installs npm's @redocly/cli at exactly REDOCLY_VERSION into
# REDOCLY_DIR (not globally), unless that version is there already; make lint-api
# runs it on api/openapi.yaml.
need_redocly() {
	[[ -x $REDOCLY_DIR/node_modules/.bin/redocly && $(cat "$REDOCLY_DIR/version" 2>/dev/null) == "$REDOCLY_VERSION" ]] &&
		return 0
	command -v npm >/dev/null || apt_install npm
	log "npm install @redocly/cli@$REDOCLY_VERSION into $REDOCLY_DIR"
	rm -f "$REDOCLY_DIR/version"
	mkdir -p "$REDOCLY_DIR"
	npm install --prefix "$REDOCLY_DIR" --save-exact --no-audit --no-fund --loglevel=error \
		"@redocly/cli@$REDOCLY_VERSION" >&2 || die "redocly: npm install @redocly/cli@$REDOCLY_VERSION failed"
	echo "$REDOCLY_VERSION" >"$REDOCLY_DIR/version"
}

# cmd_redocly ARGS: run Redocly's CLI from REDOCLY_DIR, without telemetry or
# update notices.
cmd_redocly() {
	with_lock redocly need_redocly
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true exec "$REDOCLY_DIR/node_modules/.bin/redocly" "$@"
}

# with_lock NAME CMD...: run CMD while holding $CACHE/locks/NAME, so that parallel
# test packages starting private brokers do not fetch jars or build twice at once.
with_lock() {
	local name=$1
	shift
	mkdir -p "$CACHE/locks"
	(
		flock 9
		"$@"
	) 9>"$CACHE/locks/$name"
}

# ---------------------------------------------------------------- processes

# alive PID: one of the process's threads has not exited yet. A process whose
# threads are all zombies counts as gone: its sockets are closed, and an init that
# is slow to reap orphans would otherwise keep a killed broker "alive". The leader
# alone is not enough: it turns zombie while the JVM's other threads still hold the
# listening socket.
alive() {
	local task stat
	for task in /proc/"$1"/task/*/stat; do
		stat=$(cat "$task" 2>/dev/null) || continue
		stat=${stat##*) }
		[[ ${stat:0:1} == Z ]] || return 0
	done
	return 1
}

# pid_of PIDFILE PATTERN: print the pid when PIDFILE names a live process whose
# command line contains PATTERN; remove a stale PIDFILE and fail otherwise.
pid_of() {
	local file=$1 pattern=$2 pid cmdline=''
	[[ -f $file ]] || return 1
	pid=$(<"$file")
	if [[ $pid =~ ^[0-9]+$ ]] && alive "$pid"; then
		cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
	fi
	if [[ -n $cmdline && $cmdline == *"$pattern"* ]]; then
		echo "$pid"
		return 0
	fi
	rm -f "$file"
	return 1
}

# stop_pid PIDFILE PATTERN NAME [kill]: SIGTERM (SIGKILL with "kill"), wait up to 30 s,
# then SIGKILL.
stop_pid() {
	local file=$1 pattern=$2 name=$3 mode=${4:-term} pid i
	if ! pid=$(pid_of "$file" "$pattern"); then
		log "$name: not running"
		return 0
	fi
	if [[ $mode == kill ]]; then
		kill -KILL "$pid" 2>/dev/null || true
	else
		kill -TERM "$pid" 2>/dev/null || true
	fi
	for ((i = 0; i < 300; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		log "$name: pid $pid still running after 30 s, sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		while alive "$pid"; do sleep 0.1; done
	fi
	rm -f "$file"
	log "$name: stopped (pid $pid, $mode)"
}

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
	(exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# ---------------------------------------------------------------- redis

redis_ping() {
	[[ $(timeout 3 redis-cli -h "$HOST" -p "$1" ping 2>/dev/null) == PONG ]]
}

# redis_start DIR PORT [redis-server args...]: a daemonized redis-server that
# keeps its data in DIR with the append-only file (appendfsync everysec, as in
# production: the Redis queue backend's jobs survive a restart; no RDB
# snapshots), waiting until it answers PING.
redis_start() {
	local dir=$1 port=$2 i
	shift 2
	need_redis
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	if pid_of "$dir/redis.pid" "redis-server" >/dev/null && redis_ping "$port"; then
		log "redis $HOST:$port: already running"
		return 0
	fi
	port_open "$port" && die "redis $HOST:$port: the port is taken by a process this script did not start"
	redis-server --bind "$HOST" --port "$port" --dir "$dir" --save '' --appendonly yes --appendfsync everysec \
		--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" "$@" ||
		die "redis $HOST:$port: redis-server failed; see $dir/redis.log"
	for ((i = 0; i < 100; i++)); do
		redis_ping "$port" && {
			log "redis $HOST:$port: up (pid $(cat "$dir/redis.pid" 2>/dev/null))"
			return 0
		}
		sleep 0.1
	done
	tail -n 30 "$dir/redis.log" >&2 || true
	die "redis $HOST:$port: no PONG after 10 s"
}

redis_stop() { stop_pid "$1/redis.pid" "redis-server" "redis ${3:-$1}" "${2:-term}"; }

redis_up() {
	local dir=$RUN/redis-$REDIS_PORT
	if redis_ping "$REDIS_PORT" && ! pid_of "$dir/redis.pid" redis-server >/dev/null; then
		log "redis $HOST:$REDIS_PORT: answers PING already (not started by this script); using it"
		return 0
	fi
	redis_start "$dir" "$REDIS_PORT"
}

cluster_info() {
	timeout 3 redis-cli -h "$HOST" -p "$1" cluster info 2>&1 | tr -d '\r'
}

cluster_ok() {
	local port
	for port in "${CLUSTER_PORTS[@]}"; do
		[[ $(cluster_info "$port") == *cluster_state:ok* ]] || return 1
	done
}

# cluster_up: three cluster-enabled nodes; create the cluster unless it is ok already.
# A node started here begins with a fresh nodes.conf and without its old
# append-only file (its slots are assigned anew, so its old keys would only
# make it "not empty" to the create). When that leaves a mix of new
# and old nodes, or when nodes that were all running already do not form an ok
# cluster within 10 s, every node is reset and the cluster is created anew (test
# data only).
cluster_up() {
	local port dir info i fresh=1 started=0 addrs=()
	need_redis
	for port in "${CLUSTER_PORTS[@]}"; do
		dir=$RUN/redis-cluster-$port
		addrs+=("$HOST:$port")
		if ! redis_ping "$port"; then
			rm -rf "$dir/nodes.conf" "$dir/appendonlydir"
			redis_start "$dir" "$port" --cluster-enabled yes --cluster-config-file nodes.conf \
				--cluster-node-timeout 5000
			started=1
		fi
		info=$(cluster_info "$port")
		[[ $info == *cluster_state:* ]] || die "redis $HOST:$port is not a cluster node: $info"
		[[ $info == *$'\n'cluster_known_nodes:1$'\n'* ]] || fresh=0
	done
	if cluster_ok; then
		log "redis cluster ${addrs[*]}: ok"
		return 0
	fi
	if [[ $fresh == 0 ]]; then
		for ((i = 0; started == 0 && i < 100; i++)); do
			cluster_ok && {
				log "redis cluster ${addrs[*]}: ok"
				return 0
			}
			sleep 0.1
		done
		log "redis cluster ${addrs[*]}: not ok, resetting the nodes"
		for port in "${CLUSTER_PORTS[@]}"; do
			redis-cli -h "$HOST" -p "$port" flushall >/dev/null
			redis-cli -h "$HOST" -p "$port" cluster reset hard >/dev/null
		done
	fi
	local out=$RUN/redis-cluster-create.log
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$out" 2>&1 || {
		cat "$out" >&2
		die "redis cluster: create failed"
	}
	for ((i = 0; i < 300; i++)); do
		cluster_ok && {
			log "redis cluster ${addrs[*]}: created, ok"
			return 0
		}
		sleep 0.1
	done
	for port in "${CLUSTER_PORTS[@]}"; do cluster_info "$port" >&2; done
	die "redis cluster: cluster_state not ok 30 s after create"
}

cluster_down() {
	local port
	for port in "${CLUSTER_PORTS[@]}"; do
		redis_stop "$RUN/redis-cluster-$port" term "cluster $HOST:$port"
	done
}

# ---------------------------------------------------------------- redis sentinel

# sentinel_cli PORT ARGS...: a command to the server or Sentinel on PORT, its reply
# without carriage returns.
sentinel_cli() {
	local port=$1
	shift
	timeout 3 redis-cli -h "$HOST" -p "$port" "$@" 2>/dev/null | tr -d '\r'
}

# write_sentinel_conf DIR PORT PRIMARY_PORT: the Sentinel's config, written once:
# Sentinel rewrites it (the current master, the known replicas and Sentinels), and a
# restarted Sentinel must find what it had learnt.
write_sentinel_conf() {
	local dir=$1 port=$2 pport=$3
	[[ -s $dir/sentinel.conf ]] && return 0
	cat >"$dir/sentinel.conf" <<CONF
# Written by deploy/local/services.sh sentinel-start; Sentinel rewrites it.
bind $HOST
port $port
dir $dir
sentinel monitor $SENTINEL_MASTER $HOST $pport 2
sentinel down-after-milliseconds $SENTINEL_MASTER 1000
sentinel failover-timeout $SENTINEL_MASTER 3000
sentinel parallel-syncs $SENTINEL_MASTER 1
CONF
}

# sentinel_launch DIR PORT PRIMARY_PORT: a daemonized Sentinel in DIR unless it runs.
sentinel_launch() {
	local dir=$1 port=$2 pport=$3
	mkdir -p "$dir"
	if pid_of "$dir/sentinel.pid" "[sentinel]" >/dev/null; then
		log "sentinel $HOST:$port: already running"
		return 0
	fi
	port_open "$port" && die "sentinel $HOST:$port: the port is taken by a process this script did not start"
	write_sentinel_conf "$dir" "$port" "$pport"
	redis-server "$dir/sentinel.conf" --sentinel --daemonize yes --pidfile "$dir/sentinel.pid" \
		--logfile "$dir/sentinel.log" || die "sentinel $HOST:$port: failed; see $dir/sentinel.log"
}

# sentinel_master PORT: print the master's port as the Sentinel on PORT names it,
# when that Sentinel has a quorum (SENTINEL CKQUORUM), knows the other two Sentinels
# (num-other-sentinels 2) and one replica, and does not hold the master down; fail
# otherwise.
sentinel_master() {
	local port=$1 info addr
	[[ $(sentinel_cli "$port" sentinel ckquorum "$SENTINEL_MASTER") == OK* ]] || return 1
	info=" $(sentinel_cli "$port" sentinel master "$SENTINEL_MASTER" | paste -sd' ') "
	[[ $info == *" num-slaves 1 "* && $info == *" num-other-sentinels 2 "* && $info != *s_down* && $info != *o_down* ]] || return 1
	addr=$(sentinel_cli "$port" sentinel get-master-addr-by-name "$SENTINEL_MASTER" | paste -sd' ')
	[[ -n $addr ]] || return 1
	echo "${addr##* }"
}

# sentinels_agree PRIMARY_PORT REPLICA_PORT S...: every Sentinel names the same
# master (one of the two servers), and the other server's link to it is up.
sentinels_agree() {
	local pport=$1 rport=$2 port m master='' replica
	shift 2
	for port in "$@"; do
		m=$(sentinel_master "$port") || return 1
		[[ -z $master || $m == "$master" ]] || return 1
		master=$m
	done
	case $master in
	"$pport") replica=$rport ;;
	"$rport") replica=$pport ;;
	*) return 1 ;;
	esac
	[[ $(sentinel_cli "$replica" info replication) == *master_link_status:up* ]] || return 1
	log "sentinel $SENTINEL_MASTER: master $HOST:$master, replica $HOST:$replica in sync, sentinels $*"
}

# sentinel_start DIR PRIMARY_PORT REPLICA_PORT S1,S2,S3: both servers (the first
# time the replica starts with --replicaof the primary; on a start again the
# Sentinels reconfigure whichever server they do not hold as master), then the
# Sentinels; waits until every Sentinel names the same master and its replica is in
# sync.
sentinel_start() {
	local dir=$1 pport=$2 rport=$3 sports=() port start=$SECONDS
	IFS=, read -r -a sports <<<"$4"
	[[ ${#sports[@]} == 3 ]] || die "sentinel-start: --sentinel-ports needs three ports (got $4)"
	need_redis
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	# No diskless-sync delay: a replica that (re)connects is synced at once.
	redis_start "$dir/primary" "$pport" --repl-diskless-sync-delay 0
	if [[ -f $dir/replica/.started ]]; then
		redis_start "$dir/replica" "$rport" --repl-diskless-sync-delay 0
	else
		redis_start "$dir/replica" "$rport" --repl-diskless-sync-delay 0 --replicaof "$HOST" "$pport"
		touch "$dir/replica/.started"
	fi
	for port in "${sports[@]}"; do
		sentinel_launch "$dir/sentinel-$port" "$port" "$pport"
	done
	while ((SECONDS - start < SENTINEL_START_TIMEOUT)); do
		sentinels_agree "$pport" "$rport" "${sports[@]}" && return 0
		sleep 0.2
	done
	for port in "${sports[@]}"; do
		log "sentinel $HOST:$port: $(sentinel_cli "$port" sentinel ckquorum "$SENTINEL_MASTER")"
		tail -n 15 "$dir/sentinel-$port/sentinel.log" >&2 || true
	done
	tail -n 15 "$dir/replica/redis.log" >&2 || true
	die "sentinel $SENTINEL_MASTER: not ready after $SENTINEL_START_TIMEOUT s"
}

# sentinel_stop DIR [kill]: the Sentinels first (so that none fails over while the
# servers stop), then the replica and the primary.
sentinel_stop() {
	local dir=$1 mode=${2:-term} s
	[[ -d $dir ]] || {
		log "sentinel $dir: not running"
		return 0
	}
	dir=$(cd "$dir" && pwd)
	for s in "$dir"/sentinel-*; do
		[[ -d $s ]] && stop_pid "$s/sentinel.pid" "[sentinel]" "sentinel ${s##*/}" "$mode"
	done
	redis_stop "$dir/replica" "$mode" "replica $dir"
	redis_stop "$dir/primary" "$mode" "primary $dir"
}

# sentinel_args: parse the sentinel subcommands' options into OPT_DIR, OPT_PPORT,
# OPT_RPORT, OPT_SPORTS, OPT_MODE.
sentinel_args() {
	OPT_DIR='' OPT_PPORT='' OPT_RPORT='' OPT_SPORTS='' OPT_MODE=term
	while (($#)); do
		case $1 in
		--dir) OPT_DIR=${2:?--dir needs a value} && shift ;;
		--primary-port) OPT_PPORT=${2:?--primary-port needs a value} && shift ;;
		--replica-port) OPT_RPORT=${2:?--replica-port needs a value} && shift ;;
		--sentinel-ports) OPT_SPORTS=${2:?--sentinel-ports needs a value} && shift ;;
		--kill) OPT_MODE='kill' ;;
		*) die "unknown option $1" ;;
		esac
		shift
	done
	[[ -n $OPT_DIR ]] || die "--dir is required"
}

# ---------------------------------------------------------------- kafka

fetch_kafka() {
	[[ -f $KAFKA_LIBS/.complete ]] && return 0
	need_java
	need_mvn
	local tmp=$KAFKA_LIBS.tmp start=$SECONDS
	log "kafka: fetching Apache Kafka $KAFKA_VERSION jars from Maven Central into $KAFKA_LIBS"
	rm -rf "$tmp"
	mkdir -p "$CACHE/kafka"
	mvn -B -Dstyle.color=never -f "$ROOT/deploy/local/kafka/pom.xml" dependency:copy-dependencies \
		-Dkafka.version="$KAFKA_VERSION" -Dlog4j.version="$LOG4J_VERSION" \
		-DincludeScope=runtime -DoutputDirectory="$tmp" >"$CACHE/kafka/mvn.log" 2>&1 || {
		grep -E 'ERROR|BUILD' "$CACHE/kafka/mvn.log" | head -n 20 >&2
		die "kafka: mvn could not fetch kafka_2.13:$KAFKA_VERSION (full output in $CACHE/kafka/mvn.log)"
	}
	ls "$tmp"/kafka_2.13-"$KAFKA_VERSION".jar "$tmp"/log4j-slf4j*-impl-*.jar >/dev/null ||
		die "kafka: the broker jar or the log4j SLF4J binding is missing in $tmp"
	touch "$tmp/.complete"
	rm -rf "$KAFKA_LIBS"
	mv "$tmp" "$KAFKA_LIBS"
	log "kafka: jars fetched in $((SECONDS - start)) s"
}

build_probe() {
	local src=$ROOT/deploy/local/kafkaprobe/main.go
	[[ -x $PROBE && $PROBE -nt $src ]] && return 0
	command -v go >/dev/null || die "kafka: go is needed to build deploy/local/kafkaprobe"
	mkdir -p "$(dirname "$PROBE")"
	(cd "$ROOT" && go build -o "$PROBE.tmp" ./deploy/local/kafkaprobe) || die "kafka: building kafkaprobe failed"
	mv "$PROBE.tmp" "$PROBE"
}

# kafka_ready PORT [-group]: see deploy/local/kafkaprobe.
kafka_ready() { "$PROBE" -addr "$HOST:$1" -timeout 2s "${@:2}" 2>/dev/null; }

# write_server_properties DIR PORT CONTROLLER_PORT [NODE_ID VOTERS]: a static quorum
# (a single voter, or VOTERS with this node as NODE_ID), internal topics replicated
# min(3, voters) times (min ISR 2 from 3 voters on), no automatic topic creation
# (tests create their topics), no initial rebalance delay. The broker session is 4 s
# instead of 9 s: after a SIGKILL the restarted broker cannot register until the
# controller has fenced its previous incarnation, so a killed broker is back after
# ≈5-8 s, not ≈14 s; a fenced broker also leaves every partition's ISR then, so an
# acks=all write waits no longer for a dead follower. replica.lag.time.max.ms is 10 s
# instead of 30 s, for a follower that lives but does not fetch.
write_server_properties() {
	local dir=$1 port=$2 cport=$3 node=${4:-1} voters=${5:-1@$HOST:$3} n rf isr
	n=$(tr ',' '\n' <<<"$voters" | grep -c .)
	rf=$((n < 3 ? n : 3))
	isr=$((rf >= 3 ? 2 : 1))
	cat >"$dir/server.properties" <<EOF
# Written by deploy/local/services.sh; rewritten on every start.
process.roles=broker,controller
node.id=$node
controller.quorum.voters=$voters
listeners=PLAINTEXT://$HOST:$port,CONTROLLER://$HOST:$cport
advertised.listeners=PLAINTEXT://$HOST:$port
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=1
auto.create.topics.enable=false
default.replication.factor=$rf
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=500
replica.lag.time.max.ms=10000
EOF
}

# new_cluster_id: 16 random bytes in URL-safe base64 without padding, as Kafka's
# Uuid.randomUuid makes them (never starting with "-").
new_cluster_id() {
	local id
	while :; do
		id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=')
		[[ $id != -* ]] && break
	done
	echo "$id"
}

# kafka_start DIR PORT CONTROLLER_PORT [NODE_ID VOTERS CLUSTER_ID]: kafka_launch,
# then kafka_wait.
kafka_start() {
	kafka_launch "$@"
	kafka_wait "$1" "$2"
}

# kafka_launch DIR PORT CONTROLLER_PORT [NODE_ID VOTERS CLUSTER_ID]: fetch the jars
# and build the probe when missing, format DIR/data once (with CLUSTER_ID when
# given, else DIR/cluster.id or a new id), and start the node in the background
# unless it runs already. The heap is SLUICE_KAFKA_HEAP, else -Xms256m -Xmx1g for a
# single node and -Xms128m -Xmx384m for a node of a quorum of several.
kafka_launch() {
	local dir=$1 port=$2 cport=$3 node=${4:-} voters=${5:-} cid=${6:-} heap=$KAFKA_HEAP i
	if [[ -z $heap && $voters == *,* ]]; then
		heap='-Xms128m -Xmx384m'
	elif [[ -z $heap ]]; then
		heap='-Xms256m -Xmx1g'
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	with_lock fetch-kafka fetch_kafka
	with_lock build-probe build_probe
	need_java

	if ! pid_of "$dir/kafka.pid" "$dir/server.properties" >/dev/null; then
		port_open "$port" && die "kafka $HOST:$port: the port is taken by a process this script did not start"
		port_open "$cport" && die "kafka controller $HOST:$cport: the port is taken by a process this script did not start"
		write_server_properties "$dir" "$port" "$cport" $node ${voters:+"$voters"}
		if [[ -n $cid && -s $dir/cluster.id && $(<"$dir/cluster.id") != "$cid" ]]; then
			die "kafka $dir: formatted for cluster $(<"$dir/cluster.id"), not --cluster-id $cid"
		fi
		if [[ ! -f $dir/data/meta.properties || $(cat "$dir/version" 2>/dev/null) != "$KAFKA_VERSION" ]]; then
			rm -rf "$dir/data"
			if [[ -n $cid ]]; then
				echo "$cid" >"$dir/cluster.id"
			else
				[[ -s $dir/cluster.id ]] || new_cluster_id >"$dir/cluster.id"
			fi
			# A short-lived tool: C1 only and the serial GC halve its start-up time.
			java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
				-Dlog4j2.configurationFile="$ROOT/deploy/local/kafka/log4j2.properties" \
				-cp "$KAFKA_LIBS/*" kafka.tools.StorageTool format \
				-t "$(<"$dir/cluster.id")" -c "$dir/server.properties" >>"$dir/broker.log" 2>&1 || {
				tail -n 30 "$dir/broker.log" >&2
				die "kafka: formatting $dir/data failed"
			}
			echo "$KAFKA_VERSION" >"$dir/version"
		fi
		echo "=== $(date -u +%FT%TZ) services.sh: starting Kafka $KAFKA_VERSION on $HOST:$port" >>"$dir/broker.log"
		# setsid: the broker outlives the shell that started it and does not get the
		# terminal's Ctrl-C; the wrapper writes its own pid, then becomes java.
		# shellcheck disable=SC2086,SC2016 # heap/KAFKA_JVM_OPTS hold several flags; $$ is the wrapper's
		setsid bash -c 'echo $$ >"$0"; exec "$@"' "$dir/kafka.pid" \
			java $heap $KAFKA_JVM_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
			-Djava.awt.headless=true -Dkafka.logs.dir="$dir" \
			-Dlog4j2.configurationFile="$ROOT/deploy/local/kafka/log4j2.properties" \
			-Dsluice.kafka.log.level="$KAFKA_LOG_LEVEL" \
			-cp "$KAFKA_LIBS/*" kafka.Kafka "$dir/server.properties" \
			>>"$dir/broker.log" 2>&1 </dev/null &
		for ((i = 0; i < 50; i++)); do
			[[ -s $dir/kafka.pid ]] && break
			sleep 0.1
		done
	fi
}

# kafka_wait DIR PORT: wait until the broker answers a Metadata request listing
# itself and names a group coordinator (the first time, that creates
# __consumer_offsets, ≈3 s that the first consumer group of a test would otherwise
# pay). A broker that exits or is not ready within SLUICE_KAFKA_START_TIMEOUT has the
# tail of its log printed, is stopped, and makes the script fail.
kafka_wait() {
	local dir=$1 port=$2 pid start=$SECONDS
	dir=$(cd "$dir" && pwd)
	while ((SECONDS - start < KAFKA_START_TIMEOUT)); do
		if ! pid=$(pid_of "$dir/kafka.pid" "$dir/server.properties"); then
			log "kafka $HOST:$port: the broker exited; last lines of $dir/broker.log:"
			tail -n 40 "$dir/broker.log" >&2
			die "kafka $HOST:$port: did not start"
		fi
		if kafka_ready "$port" -group; then
			log "kafka $HOST:$port: up (pid $pid, log $dir/broker.log)"
			return 0
		fi
		sleep 0.3
	done
	log "kafka $HOST:$port: not ready after $KAFKA_START_TIMEOUT s; last lines of $dir/broker.log:"
	tail -n 40 "$dir/broker.log" >&2
	stop_pid "$dir/kafka.pid" "$dir/server.properties" "kafka $HOST:$port" term
	die "kafka $HOST:$port: did not start"
}

kafka_stop() {
	local dir=$1 mode=${2:-term}
	[[ -d $dir ]] || {
		log "kafka $dir: not running"
		return 0
	}
	dir=$(cd "$dir" && pwd)
	stop_pid "$dir/kafka.pid" "$dir/server.properties" "kafka $dir" "$mode"
}

# ---------------------------------------------------------------- commands

# The shared Kafka: node i (0..KAFKA_BROKERS-1) listens on KAFKA_PORT+i, its
# controller on KAFKA_CONTROLLER_PORT+i. A single node keeps its data in
# kafka-<port>; the nodes of a cluster in kafka-cluster-<port>, formatted with the
# one id in kafka-cluster-<first port>.id.
shared_kafka_dir() {
	if ((KAFKA_BROKERS == 1)); then
		echo "$RUN/kafka-$KAFKA_PORT"
	else
		echo "$RUN/kafka-cluster-$((KAFKA_PORT + $1))"
	fi
}

# kafka_dirs prints every shared Kafka node's directory under $RUN (a single node's
# kafka-<port>, a cluster's kafka-cluster-<port>), whatever SLUICE_KAFKA_BROKERS says
# now, so down, clean and status find a cluster started with another count.
kafka_dirs() {
	local d
	for d in "$RUN"/kafka-*; do
		[[ -d $d ]] && echo "$d"
	done
	return 0
}

# kafka_port_of DIR: the client port a shared node's directory is named after.
kafka_port_of() { echo "${1##*-}"; }

shared_kafka_voters() {
	local i voters=()
	for ((i = 0; i < KAFKA_BROKERS; i++)); do voters+=("$((i + 1))@$HOST:$((KAFKA_CONTROLLER_PORT + i))"); done
	(
		IFS=,
		echo "${voters[*]}"
	)
}

# shared_kafka_launch launches every node of the shared Kafka without waiting.
shared_kafka_launch() {
	local i idfile=$RUN/kafka-cluster-$KAFKA_PORT.id
	if ((KAFKA_BROKERS == 1)); then
		kafka_launch "$(shared_kafka_dir 0)" "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"
		return
	fi
	mkdir -p "$RUN"
	[[ -s $idfile ]] || new_cluster_id >"$idfile"
	for ((i = 0; i < KAFKA_BROKERS; i++)); do
		kafka_launch "$(shared_kafka_dir "$i")" "$((KAFKA_PORT + i))" "$((KAFKA_CONTROLLER_PORT + i))" \
			"$((i + 1))" "$(shared_kafka_voters)" "$(<"$idfile")"
	done
}

shared_kafka_wait() {
	local i
	for ((i = 0; i < KAFKA_BROKERS; i++)); do kafka_wait "$(shared_kafka_dir "$i")" "$((KAFKA_PORT + i))"; done
}

# cmd_up launches Kafka first, so the JVMs boot while the Redis servers start.
cmd_up() {
	local start=$SECONDS
	shared_kafka_launch
	redis_up
	cluster_up
	shared_kafka_wait
	log "all up in $((SECONDS - start)) s"
}

# cmd_down stops the nodes of a Kafka cluster all at once: stopped one at a time,
# the last ones wait in vain for a controller quorum to shut down cleanly.
cmd_down() {
	local d dirs=()
	mapfile -t dirs < <(kafka_dirs)
	for d in "${dirs[@]}"; do kafka_stop "$d" & done
	wait
	cluster_down
	redis_stop "$RUN/redis-$REDIS_PORT" term "$HOST:$REDIS_PORT"
}

cmd_status() {
	local rc=0 port
	if redis_ping "$REDIS_PORT"; then
		echo "redis          $HOST:$REDIS_PORT  up"
	else
		echo "redis          $HOST:$REDIS_PORT  down"
		rc=1
	fi
	for port in "${CLUSTER_PORTS[@]}"; do
		if redis_ping "$port"; then
			echo "redis cluster  $HOST:$port  up, $(cluster_info "$port" | sed -n '/^cluster_state:/p')"
		else
			echo "redis cluster  $HOST:$port  down"
			rc=1
		fi
	done
	cluster_ok || rc=1
	for ((port = KAFKA_PORT; port < KAFKA_PORT + KAFKA_BROKERS; port++)); do
		if [[ -x $PROBE ]] && kafka_ready "$port"; then
			echo "kafka          $HOST:$port  up"
		else
			echo "kafka          $HOST:$port  down"
			rc=1
		fi
	done
	status_other_kafka
	return $rc
}

# status_other_kafka reports the shared Kafka nodes running from $RUN outside the
# ports SLUICE_KAFKA_BROKERS names now (a cluster started with another count).
status_other_kafka() {
	local d port
	while read -r d; do
		port=$(kafka_port_of "$d")
		[[ $port =~ ^[0-9]+$ ]] || continue
		((port >= KAFKA_PORT && port < KAFKA_PORT + KAFKA_BROKERS)) && continue
		d=$(cd "$d" && pwd)
		pid_of "$d/kafka.pid" "$d/server.properties" >/dev/null || continue
		echo "kafka          $HOST:$port  running from $d (not in SLUICE_KAFKA_BROKERS=$KAFKA_BROKERS; down stops it)"
	done < <(kafka_dirs)
}

cmd_env() {
	local port addrs=() brokers=()
	for port in "${CLUSTER_PORTS[@]}"; do addrs+=("$HOST:$port"); done
	for ((port = KAFKA_PORT; port < KAFKA_PORT + KAFKA_BROKERS; port++)); do brokers+=("$HOST:$port"); done
	echo "SLUICE_TEST_REDIS=$HOST:$REDIS_PORT"
	echo "SLUICE_TEST_KAFKA=$(
		IFS=,
		echo "${brokers[*]}"
	)"
	echo "SLUICE_TEST_REDIS_CLUSTER=$(
		IFS=,
		echo "${addrs[*]}"
	)"
}

cmd_clean() {
	cmd_down
	rm -rf "$RUN"
	log "removed $RUN"
}

usage() {
	sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}

# private_args: parse --dir/--port/--controller-port/--node-id/--voters/--cluster-id/
# --kill of the private-server subcommands into OPT_DIR, OPT_PORT, OPT_CPORT,
# OPT_NODE, OPT_VOTERS, OPT_CID, OPT_MODE.
private_args() {
	OPT_DIR='' OPT_PORT='' OPT_CPORT='' OPT_NODE='' OPT_VOTERS='' OPT_CID='' OPT_MODE=term
	while (($#)); do
		case $1 in
		--dir) OPT_DIR=${2:?--dir needs a value} && shift ;;
		--port) OPT_PORT=${2:?--port needs a value} && shift ;;
		--controller-port) OPT_CPORT=${2:?--controller-port needs a value} && shift ;;
		--node-id) OPT_NODE=${2:?--node-id needs a value} && shift ;;
		--voters) OPT_VOTERS=${2:?--voters needs a value} && shift ;;
		--cluster-id) OPT_CID=${2:?--cluster-id needs a value} && shift ;;
		--kill) OPT_MODE='kill' ;;
		*) die "unknown option $1" ;;
		esac
		shift
	done
	[[ -n $OPT_DIR ]] || die "--dir is required"
}

main() {
	local cmd=${1:-up}
	(($#)) && shift
	case $cmd in
	up) cmd_up ;;
	down) cmd_down ;;
	status) cmd_status ;;
	env) cmd_env ;;
	clean) cmd_clean ;;
	tools) cmd_tools ;;
	redocly) cmd_redocly "$@" ;;
	kafka-start)
		private_args "$@"
		[[ -n $OPT_PORT && -n $OPT_CPORT ]] || die "kafka-start needs --port and --controller-port"
		[[ (-z $OPT_NODE && -z $OPT_VOTERS) || (-n $OPT_NODE && -n $OPT_VOTERS) ]] || die "kafka-start: --node-id and --voters go together"
		[[ -z $OPT_NODE || ,$OPT_VOTERS, == *",$OPT_NODE@$HOST:$OPT_CPORT,"* ]] ||
			die "kafka-start: --voters must list $OPT_NODE@$HOST:$OPT_CPORT (--node-id@127.0.0.1:--controller-port)"
		[[ -z $OPT_CID || $OPT_CID =~ ^[A-Za-z0-9_][A-Za-z0-9_-]{21}$ ]] || die "kafka-start: --cluster-id must be a 22-character Kafka Uuid"
		kafka_start "$OPT_DIR" "$OPT_PORT" "$OPT_CPORT" "$OPT_NODE" "$OPT_VOTERS" "$OPT_CID"
		;;
	kafka-stop)
		private_args "$@"
		kafka_stop "$OPT_DIR" "$OPT_MODE"
		;;
	redis-start)
		private_args "$@"
		[[ -n $OPT_PORT ]] || die "redis-start needs --port"
		redis_start "$OPT_DIR" "$OPT_PORT"
		;;
	redis-stop)
		private_args "$@"
		redis_stop "$OPT_DIR" "$OPT_MODE"
		;;
	sentinel-start)
		sentinel_args "$@"
		[[ -n $OPT_PPORT && -n $OPT_RPORT && -n $OPT_SPORTS ]] ||
			die "sentinel-start needs --primary-port, --replica-port and --sentinel-ports"
		sentinel_start "$OPT_DIR" "$OPT_PPORT" "$OPT_RPORT" "$OPT_SPORTS"
		;;
	sentinel-stop)
		sentinel_args "$@"
		sentinel_stop "$OPT_DIR" "$OPT_MODE"
		;;
	-h | --help | help) usage ;;
	*)
		usage >&2
		exit 2
		;;
	esac
}

main "$@"
