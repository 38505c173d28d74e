//go:build chaos

package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The replicated topologies of issue 10 requirements 2 and 3: a Redis
// primary, a replica and three Sentinels (the Redis backend with
// redis.wait_replicas 1), and a 3-node Kafka cluster (replication factor 3,
// min ISR 2, both sluice's automatic values).

// sentinelStores is the Sentinel topology; the row's faults use srv.ha.
func sentinelStores(t *testing.T, backend string) *servers {
	if backend != "redis" {
		t.Fatalf("the Sentinel rows run on the Redis backend, not %s", backend)
	}
	ha := testenv.StartSentinel(t)
	s := &servers{ha: ha}
	s.redisYAML = fmt.Sprintf("redis: {sentinel: {master_name: %s, addrs: [%s]}, timeout: 1s, wait_replicas: 1}",
		ha.MasterName(), strings.Join(ha.SentinelAddrs(), ", "))
	return s
}

// clusterStores is a private Redis (AOF) and a 3-node Kafka cluster with
// the row's topics on one partition, so that "the leader of the partitions
// in use" is one node.
func clusterStores(t *testing.T, backend string) *servers {
	if backend != "kafka" {
		t.Fatalf("the Kafka cluster rows run on the Kafka backend, not %s", backend)
	}
	s := &servers{redis: testenv.StartRedis(t, aof...), cluster: testenv.StartKafkaCluster(t, 3)}
	s.redisYAML = fmt.Sprintf("redis: {addr: %q, timeout: 1s}", s.redis.Addr())
	s.topic = testenv.Name(t, "chaos-jobs")
	s.kafkaYAML = fmt.Sprintf("kafka: {brokers: [%s], topic: %s, dlq_topic: %s, partitions: 1, consumer_group: %s}",
		strings.Join(s.cluster.Brokers(), ", "), s.topic, testenv.Name(t, "chaos-dlq"), testenv.Name(t, "chaos-group"))
	return s
}

// sentinelFailover SIGKILLs the primary, waits for the Sentinels to
// promote the replica, and brings the killed server back as a replica
// (with wait_replicas 1, enqueues are 503s until a replica is in sync).
func sentinelFailover(st *stack) span {
	st.srv.ha.KillPrimary()
	at := time.Now()
	st.srv.ha.WaitFailover(30 * time.Second)
	st.srv.ha.Rejoin()
	return once(at)
}

// killNode SIGKILLs the node pick names and starts it again after 2 s.
func killNode(pick func(st *stack) int) faultFunc {
	return func(st *stack) span {
		i := pick(st)
		if i < 0 {
			st.t.Fatal("no node to kill: the cluster names no leader or controller")
		}
		st.t.Logf("killing Kafka node %d", i)
		st.srv.cluster.Node(i).Kill()
		at := time.Now()
		time.Sleep(2 * time.Second)
		st.srv.cluster.StartNodes(i)
		return once(at)
	}
}

var (
	leaderKill     = killNode(func(st *stack) int { return st.srv.cluster.LeaderOf(st.srv.topic, 0) })
	controllerKill = killNode(func(st *stack) int { return st.srv.cluster.ActiveController() })
)

// haTopo is the fault rows' topology on a replicated store.
func haTopo(stores storesFunc) topology {
	return topology{stores: stores, drainers: 2, tenants: 2, rate: 50}
}
