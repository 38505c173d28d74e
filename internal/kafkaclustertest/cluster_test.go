package kafkaclustertest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// Bounds of the test, generous against the figures it logs (on two busy
// cores): 202s are back within recoverBound of a leader's or the active
// controller's SIGKILL (the controller fences the dead broker after its 4 s
// session, then elects a new leader; measured ≈5-7 s), and within
// restartBound of the start of the restart of two killed nodes (measured
// ≈5 s).
const (
	recoverBound = 30 * time.Second
	restartBound = 30 * time.Second
)

// TestKafkaClusterFaults is the Kafka backend's promise on a replicated
// cluster: 3 nodes, the jobs topic replicated 3 times with
// min.insync.replicas 2 (sluice's defaults there), ingest under HTTP load
// with an id per job, two drainers, a sink. Each scenario keeps a ledger of
// every answer and then checks that each 202'd job reached the sink:
//
//   - leader: SIGKILL the partition's leader. 202'd jobs: none lost; 503 +
//     Retry-After allowed while the partition has no leader, never a false
//     202; 202s back within recoverBound; the drainers go on delivering.
//     The node is restarted under load.
//   - controller: the same with the active controller.
//   - min-isr: SIGKILL the leader's two followers, so no write can reach 2
//     replicas: every job sent after the kill and answered before the
//     restart is a 503 + Retry-After; after the restart 202s return within
//     restartBound.
//   - not-enough-replicas: the producer's NOT_ENOUGH_REPLICAS is
//     queue.ErrUnavailable (see notEnoughReplicas).
func TestKafkaClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node Kafka cluster and kills its nodes (≈80 s)")
	}
	start := time.Now()
	c := testenv.StartKafkaCluster(t, 3)
	st := startStack(t, c.Brokers())
	topic := st.bcfg.Kafka.Topic
	checkReplication(t, c, topic)
	t.Logf("cluster and stack ready after %v", time.Since(start).Round(time.Millisecond))

	t.Run("leader", func(t *testing.T) {
		st.killOne(t, c, "leader", func() int { return waitIndex(t, "the partition's leader", func() int { return c.LeaderOf(topic, 0) }) })
	})
	t.Run("controller", func(t *testing.T) {
		st.killOne(t, c, "controller", func() int { return waitIndex(t, "the active controller", c.ActiveController) })
	})
	t.Run("min-isr", func(t *testing.T) { st.killFollowers(t, c, topic) })
	t.Run("not-enough-replicas", func(t *testing.T) { notEnoughReplicas(t, c, st) })
}

// killOne runs a scenario that SIGKILLs the node pick returns under load.
func (st *stack) killOne(t *testing.T, c *testenv.KafkaCluster, name string, pick func() int) {
	l := st.startLoad(name)
	time.Sleep(2 * time.Second)
	node := pick()
	t.Logf("%s: SIGKILL node %d (partition leader %d, active controller %d, group coordinator %d)", name, node,
		c.LeaderOf(st.bcfg.Kafka.Topic, 0), c.ActiveController(), c.LeaderOf("__consumer_offsets", 0))
	c.Node(node).Kill()
	killed := time.Now() // the node has exited: a job sent from now on cannot reach it
	var back answer
	testenv.WaitFor(t, recoverBound, "a 202 after the SIGKILL", func() bool {
		var ok bool
		l.mu.Lock()
		back, ok = firstAccepted(l.answers, killed)
		l.mu.Unlock()
		return ok
	})
	recovered := back.done.Sub(killed)
	c.StartNodes(node)
	time.Sleep(time.Second)
	answers := l.finish()
	tl := st.check(t, answers)
	if at, ok := st.sink.firstDelivery(answers, killed); ok {
		t.Logf("%s: the drainers delivered a job sent after the SIGKILL %v after it", name, at.Sub(killed).Round(10*time.Millisecond))
	}
	logTally(t, name, tl, recovered)
}

// killFollowers runs the min-isr scenario: the leader of topic's partition
// stays, its two followers are SIGKILLed.
func (st *stack) killFollowers(t *testing.T, c *testenv.KafkaCluster, topic string) {
	l := st.startLoad("minisr")
	time.Sleep(2 * time.Second)
	leader := waitIndex(t, "the partition's leader", func() int { return c.LeaderOf(topic, 0) })
	var followers []int
	for i := range 3 {
		if i != leader {
			followers = append(followers, i)
		}
	}
	t.Logf("min-isr: SIGKILL nodes %v, followers of leader %d", followers, leader)
	for _, i := range followers {
		c.Node(i).Kill()
	}
	killed := time.Now()
	time.Sleep(8 * time.Second)
	restart := time.Now()
	c.StartNodes(followers...)
	restarted := time.Now()
	var back answer
	testenv.WaitFor(t, restartBound, "a 202 after the restart", func() bool {
		var ok bool
		l.mu.Lock()
		back, ok = firstAccepted(l.answers, restart)
		l.mu.Unlock()
		return ok
	})
	time.Sleep(time.Second)
	answers := l.finish()
	refused := 0
	for _, a := range answers {
		if a.sent.Before(killed) || !a.done.Before(restart) {
			continue
		}
		if a.status != http.StatusServiceUnavailable || a.retryAfter == "" {
			t.Errorf("job %s sent %v after the kill, answered before the restart: %d, Retry-After %q; want 503 + Retry-After",
				a.id, a.sent.Sub(killed).Round(time.Millisecond), a.status, a.retryAfter)
		}
		refused++
	}
	if refused == 0 {
		t.Errorf("no job was sent and answered while two nodes were down")
	}
	t.Logf("min-isr: %d answers while 2 of 3 nodes were down (%v), all 503 + Retry-After; restart took %v (until both answer a group coordinator); the 202s below are back after the restart began",
		refused, restart.Sub(killed).Round(time.Millisecond), restarted.Sub(restart).Round(time.Millisecond))
	logTally(t, "min-isr", st.check(t, answers), back.done.Sub(restart))
}

// waitIndex waits up to 30 s until f returns a node index (>= 0).
func waitIndex(t *testing.T, what string, f func() int) int {
	t.Helper()
	i := -1
	testenv.WaitFor(t, 30*time.Second, what, func() bool { i = f(); return i >= 0 })
	return i
}

// checkReplication fails unless the topic sluice created has 3 replicas per
// partition and min.insync.replicas 2.
func checkReplication(t *testing.T, c *testenv.KafkaCluster, topic string) {
	t.Helper()
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers()...), Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 1 {
		t.Fatalf("metadata of %s: %+v, %v", topic, md, err)
	}
	if n := len(md.Topics[0].Partitions[0].Replicas); n != 3 {
		t.Errorf("topic %s: %d replicas, want 3 (kafka.replication_factor 0 = min(3, brokers))", topic, n)
	}
	dc, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"min.insync.replicas"},
	}}})
	if err != nil || len(dc.Resources) != 1 || len(dc.Resources[0].ConfigEntries) != 1 {
		t.Fatalf("describe configs of %s: %+v, %v", topic, dc, err)
	}
	if v := dc.Resources[0].ConfigEntries[0].ConfigValue; v != strconv.Itoa(2) {
		t.Errorf("topic %s: min.insync.replicas %s, want 2 (kafka.min_insync_replicas 0 = 2 from 3 replicas)", topic, v)
	}
}

// notEnoughReplicas: on a topic with 3 replicas and min.insync.replicas 3,
// one follower's SIGKILL leaves 2 in sync once the controller has fenced it:
// the leader refuses acks=all writes with NOT_ENOUGH_REPLICAS, and Enqueue
// returns that wrapped in queue.ErrUnavailable (ingest's 503 + Retry-After).
// (A single broker cannot show it: Kafka caps the effective min ISR at the
// replication factor.)
func notEnoughReplicas(t *testing.T, c *testenv.KafkaCluster, st *stack) {
	k := st.bcfg.Kafka
	k.Topic, k.ReplicationFactor, k.MinInsyncReplicas, k.ProduceTimeout = testenv.Name(t, "isr3"), 3, 3, time.Second
	p, err := kafkaq.NewProducer(t.Context(), kafkaq.ProducerConfig{Kafka: k})
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	defer p.Close()
	job := func(id string) []queue.Envelope {
		return []queue.Envelope{{ID: id, Tenant: st.tenant, Type: "t", Cost: 1}}
	}
	// A new topic's followers take a moment to join its ISR.
	testenv.WaitFor(t, 20*time.Second, "an enqueue with 3 of 3 in sync", func() bool {
		return p.Enqueue(t.Context(), job("isr-before")) == nil
	})
	leader := waitIndex(t, "the leader of "+k.Topic, func() int { return c.LeaderOf(k.Topic, 0) })
	c.Node((leader + 1) % 3).Kill()
	killed := time.Now()
	var last error
	testenv.WaitFor(t, 20*time.Second, "NOT_ENOUGH_REPLICAS", func() bool {
		last = p.Enqueue(t.Context(), job("isr-after"))
		return errors.Is(last, kafka.NotEnoughReplicas)
	})
	if !errors.Is(last, queue.ErrUnavailable) {
		t.Errorf("enqueue with 2 of 3 in sync: %v; want it to wrap queue.ErrUnavailable", last)
	}
	t.Logf("not-enough-replicas: node %d killed; %v later: %v", (leader+1)%3, time.Since(killed).Round(time.Millisecond), last)
}
