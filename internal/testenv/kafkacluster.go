package testenv

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// KafkaCluster is a private Kafka cluster of n nodes for one test, each a
// combined broker and controller (KRaft, a static quorum of all n), started
// by deploy/local/services.sh kafka-start --node-id --voters --cluster-id in
// temporary directories on free loopback ports, with heaps of
// -Xms128m -Xmx384m. Node i (0-based) has Kafka node id i+1. From 3 nodes on,
// the internal topics (__consumer_offsets, transaction state) are replicated
// 3 times and default.replication.factor is 3; min.insync.replicas is the
// broker default (1), so a topic that needs 2 says so itself.
//
// Timing, measured on two cores shared with other tests and brokers:
// StartKafkaCluster(t, 3) takes 10-16 s (the nodes start in parallel:
// launched together, then each awaited, so about what one broker takes on a
// busy machine), a node's restart after Kill 5-9 s, two nodes' restart in
// parallel 9-14 s. Call the methods from the test goroutine; they fail the
// test on error.
type KafkaCluster struct {
	t     testing.TB
	nodes []*KafkaProc
}

// StartKafkaCluster starts n nodes (1..5) and returns once every one answers
// a Metadata request listing itself and a group coordinator exists. The
// nodes are killed when the test ends; when it failed, the tail of each
// node's log is logged first.
func StartKafkaCluster(t testing.TB, n int) *KafkaCluster {
	t.Helper()
	if n < 1 || n > 5 {
		t.Fatalf("testenv: StartKafkaCluster: n = %d, want 1..5", n)
	}
	ports := freePorts(t, 2*n)
	voters := make([]string, n)
	for i := range n {
		voters[i] = fmt.Sprintf("%d@127.0.0.1:%d", i+1, ports[n+i])
	}
	c := &KafkaCluster{t: t}
	script, cid := servicesScript(t), newClusterID()
	for i := range n {
		c.nodes = append(c.nodes, &KafkaProc{t: t, script: script, dir: t.TempDir(), port: ports[i], cport: ports[n+i],
			node: i + 1, voters: strings.Join(voters, ","), clusterID: cid})
	}
	t.Cleanup(func() {
		for _, k := range c.nodes {
			if t.Failed() {
				t.Logf("testenv: last lines of node %d's %s:\n%s", k.node, k.LogPath(), tail(k.LogPath(), 30))
			}
			k.run("kafka-stop", "--dir", k.dir, "--kill")
		}
	})
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	c.StartNodes(all...)
	return c
}

// newClusterID returns a Kafka Uuid: 16 random bytes in URL-safe base64
// without padding, not starting with '-'.
func newClusterID() string {
	for {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		if id := base64.RawURLEncoding.EncodeToString(b); id[0] != '-' {
			return id
		}
	}
}

// StartNodes starts the given nodes (again) in parallel and waits until each
// is ready; a running node is left as it is.
func (c *KafkaCluster) StartNodes(idx ...int) {
	c.t.Helper()
	start := time.Now()
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for j, i := range idx {
		wg.Go(func() { errs[j] = c.Node(i).start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
	c.t.Logf("testenv: kafka nodes %v ready after %v", idx, time.Since(start).Round(time.Millisecond))
}

// Brokers returns every node's broker address, the bootstrap list.
func (c *KafkaCluster) Brokers() []string {
	out := make([]string, len(c.nodes))
	for i, k := range c.nodes {
		out[i] = k.Addr()
	}
	return out
}

// Node returns node i (0..n-1), to stop, kill, pause or restart it.
func (c *KafkaCluster) Node(i int) *KafkaProc {
	c.t.Helper()
	if i < 0 || i >= len(c.nodes) {
		c.t.Fatalf("testenv: kafka cluster has nodes 0..%d, not %d", len(c.nodes)-1, i)
	}
	return c.nodes[i]
}

// LeaderOf returns the index of the node that leads the topic's partition,
// as the first node to answer a Metadata request says (a killed leader stays
// named until the controller fences it, ≈4 s), or -1 when the partition has
// no leader or no node answers within 2 s each.
func (c *KafkaCluster) LeaderOf(topic string, partition int) int {
	for _, k := range c.nodes {
		md, err := metadataOf(k.Addr(), topic)
		if err != nil {
			continue
		}
		for _, tp := range md.Topics {
			for _, p := range tp.Partitions {
				if tp.Name == topic && p.ID == partition && p.Leader.Host != "" {
					return p.Leader.ID - 1
				}
			}
		}
		return -1
	}
	return -1
}

// metadataOf asks the broker at addr alone for topic's metadata, on a
// connection of its own.
func metadataOf(addr, topic string) (*kafka.MetadataResponse, error) {
	tr := &kafka.Transport{DialTimeout: 2 * time.Second}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP(addr), Transport: tr}
	return client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
}

// ActiveController returns the index of the node that leads the KRaft quorum
// (the active controller), or -1 while an election runs. kafka-go has no
// DescribeQuorum, and a KRaft broker's Metadata answer names a random broker
// as "controller", so it is read from the quorum's own record: each voter's
// <log.dirs>/__cluster_metadata-0/quorum-state, which the raft client
// rewrites on every election it learns of ({"leaderId":2,"leaderEpoch":5,
// ...}); the highest epoch any node recorded is the current one (a killed or
// paused node's file only lags).
func (c *KafkaCluster) ActiveController() int {
	c.t.Helper()
	leader, epoch := -1, -1
	for _, k := range c.nodes {
		b, err := os.ReadFile(filepath.Join(k.dir, "data", "__cluster_metadata-0", "quorum-state"))
		if err != nil {
			continue // not formatted or rewritten this instant
		}
		var qs struct {
			LeaderID    int `json:"leaderId"`
			LeaderEpoch int `json:"leaderEpoch"`
		}
		if err := json.Unmarshal(b, &qs); err != nil {
			continue
		}
		if qs.LeaderEpoch > epoch || (qs.LeaderEpoch == epoch && leader < 0) {
			leader, epoch = qs.LeaderID-1, qs.LeaderEpoch
		}
	}
	if leader < 0 || leader >= len(c.nodes) {
		return -1
	}
	return leader
}
