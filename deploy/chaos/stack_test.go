//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
)

// servers are the stores of one row and the config sections naming them.
// redis holds the jobs on the Redis backend and the state (limits, ids, job
// states, backlog counters) on both; kafka is nil on the Redis backend and
// on the shared broker, which no row may fault.
type servers struct {
	redisYAML, kafkaYAML string
	redis                *testenv.RedisProc
	kafka                *testenv.KafkaProc
	ha                   *testenv.RedisHA      // sentinelStores
	cluster              *testenv.KafkaCluster // clusterStores
	topic                string                // clusterStores: the jobs topic
}

// storesFunc starts a row's stores for backend ("redis" or "kafka"). A new
// topology (Sentinel, a Kafka cluster) is one more such function setting
// the sections its servers need, plus the fields its faults use.
type storesFunc func(t *testing.T, backend string) *servers

// aof are redis-server's persistence arguments as every shipped
// configuration runs it (deploy/local/services.sh, docker-compose, k8s).
var aof = []string{"--appendonly", "yes", "--appendfsync", "everysec"}

// standalone is one private Redis with AOF and, on the Kafka backend, the
// shared broker with the row's own topics and group (private: a broker of
// the row's own, which its fault may kill).
func standalone(privateKafka bool) storesFunc {
	return func(t *testing.T, backend string) *servers {
		s := &servers{redis: testenv.StartRedis(t, aof...)}
		s.redisYAML = fmt.Sprintf("redis: {addr: %q, timeout: 1s}", s.redis.Addr())
		if backend != "kafka" {
			return s
		}
		var brokers []string
		if privateKafka {
			s.kafka = testenv.StartKafka(t)
			brokers = s.kafka.Brokers()
		} else {
			brokers = testenv.KafkaBrokers(t)
		}
		s.kafkaYAML = kafkaSection(t, brokers, !privateKafka)
		return s
	}
}

// kafkaSection is the kafka section of a row: its own topics (deleted at
// the end when del) and consumer group, 6 partitions, every group timeout
// at its shipped default.
func kafkaSection(t *testing.T, brokers []string, del bool) string {
	topic, dlq := testenv.Name(t, "chaos-jobs"), testenv.Name(t, "chaos-dlq")
	if del {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
			_, _ = c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{topic, dlq}})
		})
	}
	return fmt.Sprintf("kafka: {brokers: [%s], topic: %s, dlq_topic: %s, partitions: 6, consumer_group: %s}",
		strings.Join(brokers, ", "), topic, dlq, testenv.Name(t, "chaos-group"))
}

// topology is what a row runs: its stores, how many drainers, and its
// tenants' outflow (rate per tenant, capacity 0 = the default max(1, rate)).
type topology struct {
	stores   storesFunc
	drainers int
	tenants  int
	rate     float64
	capacity float64
}

// stack is one row's running system.
type stack struct {
	t         *testing.T
	backend   string
	srv       *servers
	sink      *sink
	tenants   []string
	ingestURL string
	ingest    *proc
	drainers  []*proc
}

// tenantKey is the API key of tenant.
func tenantKey(tenant string) string { return "key-" + tenant }

// startStack starts the row's stores and ingest; the drainers are made but
// not started (startDrainers).
func startStack(t *testing.T, backend string, topo topology) *stack {
	st := &stack{t: t, backend: backend, sink: newSink(t), srv: topo.stores(t, backend)}
	for i := range topo.tenants {
		st.tenants = append(st.tenants, fmt.Sprintf("t%d", i))
	}
	ingestAddr := testenv.FreeAddr(t)
	st.ingestURL = "http://" + ingestAddr
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(st.configYAML(topo, ingestAddr)), 0o600); err != nil {
		t.Fatal(err)
	}
	st.ingest = newProc(t, "ingest", "ingest", path, ingestAddr)
	st.ingest.start()
	for i := range topo.drainers {
		addr := testenv.FreeAddr(t)
		st.drainers = append(st.drainers, newProc(t, fmt.Sprintf("drainer-%d", i), "drainer", path, addr,
			"SLUICE_DRAINER_LISTEN="+addr))
	}
	return st
}

// startDrainers starts every drainer, one after the other.
func (st *stack) startDrainers() {
	for _, d := range st.drainers {
		d.start()
	}
}

// configYAML is the row's config file. Differences from the shipped
// defaults, to keep rows short: a 10 s lease (a SIGKILLed drainer's claimed
// jobs come back sooner on the Redis backend), short backoff, a 5 s
// shutdown_timeout and a 1 s Redis timeout (the machine is shared).
func (st *stack) configYAML(topo topology, ingestAddr string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nqueue: {backend: %s}\n%s\n", st.srv.redisYAML, st.backend, st.srv.kafkaYAML)
	fmt.Fprintf(&b, "ingest: {listen: %q}\n", ingestAddr)
	b.WriteString("drainer: {lease: 10s, backoff_base: 100ms, backoff_max: 1s, shutdown_timeout: 5s}\n")
	b.WriteString("tenants:\n")
	for _, tn := range st.tenants {
		capacity := ""
		if topo.capacity > 0 {
			capacity = fmt.Sprintf(", capacity: %g", topo.capacity)
		}
		fmt.Fprintf(&b, "  %s:\n    api_keys: [%q]\n    outflow: {rate: %g%s}\n    target: {url: %q, timeout: 5s}\n",
			tn, config.HashKey(tenantKey(tn)), topo.rate, capacity, st.sink.url(tn))
	}
	return b.String()
}
