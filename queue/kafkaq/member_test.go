package kafkaq_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// memberSession is the session of the member tests: long, so that a group
// that forms again well before it can only have done so because the
// killed member was removed, not because its session expired.
const memberSession = 30 * time.Second

// TestKilledMemberRemovedByItsRestart: a consumer process of instance "a"
// is SIGKILLed (it never leaves the group); its restart removes the dead
// member at start, so the group is stable again with the restart and the
// survivor long before the dead member's 30-s session would have expired.
func TestKilledMemberRemovedByItsRestart(t *testing.T) {
	e := newKafkaEnv(t, 2)
	cfg := e.memberConfig("b")
	_, _ = e.consumer(cfg, nil)

	child := e.startMemberChild("a")
	key := keys.KafkaMember(e.cfg.ConsumerGroup, "a")
	var dead string
	testenv.WaitFor(t, 60*time.Second, "the child's member recorded and the group stable with 2 members", func() bool {
		v, err := e.rdb.Get(context.Background(), key).Result()
		if err != nil {
			return false
		}
		f := strings.SplitN(v, " ", 3)
		dead = f[len(f)-1]
		members, state := e.groupMembers()
		return state == "Stable" && len(members) == 2 && slices.Contains(members, dead)
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killed := time.Now()

	reg := prometheus.NewRegistry()
	_, _ = e.consumer(e.memberConfig("a"), reg)
	testenv.WaitFor(t, memberSession/2, "the group stable again without the killed member", func() bool {
		members, state := e.groupMembers()
		return state == "Stable" && len(members) == 2 && !slices.Contains(members, dead)
	})
	t.Logf("group stable again %v after the SIGKILL (session %v)", time.Since(killed).Round(time.Millisecond), memberSession)
	if n := testenv.MetricValue(t, reg, "sluice_kafka_predecessors_removed_total", nil); n != 1 {
		t.Fatalf("sluice_kafka_predecessors_removed_total = %v, want 1", n)
	}
}

// TestLiveMemberOfSameInstanceKept: a second live process with the same
// instance name does not remove the first one's member.
func TestLiveMemberOfSameInstanceKept(t *testing.T) {
	e := newKafkaEnv(t, 2)
	_, _ = e.consumer(e.memberConfig("s"), nil)
	key := keys.KafkaMember(e.cfg.ConsumerGroup, "s")
	var first string
	testenv.WaitFor(t, 60*time.Second, "the first member recorded", func() bool {
		v, err := e.rdb.Get(context.Background(), key).Result()
		f := strings.SplitN(v, " ", 3)
		first = f[len(f)-1]
		return err == nil
	})
	reg := prometheus.NewRegistry()
	_, _ = e.consumer(e.memberConfig("s"), reg)
	testenv.WaitFor(t, 60*time.Second, "the group stable with both members", func() bool {
		members, state := e.groupMembers()
		return state == "Stable" && len(members) == 2 && slices.Contains(members, first)
	})
	if n := testenv.MetricValue(t, reg, "sluice_kafka_predecessors_removed_total", nil); n != 0 {
		t.Fatalf("sluice_kafka_predecessors_removed_total = %v, want 0 (the first process lives)", n)
	}
}

// TestMemberChild is the consumer process that TestKilledMemberRemovedByItsRestart
// kills; it runs only when started by that test.
func TestMemberChild(t *testing.T) {
	if os.Getenv("SLUICE_MEMBER_CHILD") == "" {
		t.Skip("a child process of TestKilledMemberRemovedByItsRestart")
	}
	e := &kafkaEnv{t: t, rdb: testenv.Redis(t), cfg: kafkaq.Settings{
		Brokers: testenv.KafkaBrokers(t), Topic: os.Getenv("SLUICE_MEMBER_TOPIC"), DLQTopic: os.Getenv("SLUICE_MEMBER_DLQ"),
		Partitions: 2, ReplicationFactor: 1, ConsumerGroup: os.Getenv("SLUICE_MEMBER_GROUP"),
	}}
	_, _ = e.consumer(e.memberConfig(os.Getenv("SLUICE_MEMBER_CHILD")), nil)
	time.Sleep(5 * time.Minute) // until killed
}

func (e *kafkaEnv) memberConfig(instance string) kafkaq.ConsumerConfig {
	cfg := e.consumerConfig()
	cfg.Kafka.Instance = instance
	cfg.SessionTimeout, cfg.RebalanceTimeout = memberSession, 40*time.Second
	return cfg
}

// startMemberChild runs TestMemberChild of this test binary as a process
// of instance.
func (e *kafkaEnv) startMemberChild(instance string) *exec.Cmd {
	e.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestMemberChild$", "-test.timeout", "10m")
	cmd.Env = append(os.Environ(), "SLUICE_MEMBER_CHILD="+instance, "SLUICE_MEMBER_TOPIC="+e.cfg.Topic,
		"SLUICE_MEMBER_DLQ="+e.cfg.DLQTopic, "SLUICE_MEMBER_GROUP="+e.cfg.ConsumerGroup)
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

// groupMembers returns the member ids and the state of e's group.
func (e *kafkaEnv) groupMembers() ([]string, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := e.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{e.cfg.ConsumerGroup}})
	if err != nil || len(res.Groups) != 1 || res.Groups[0].Error != nil {
		return nil, ""
	}
	g := res.Groups[0]
	ids := make([]string, len(g.Members))
	for i, m := range g.Members {
		ids[i] = m.MemberID
	}
	return ids, g.GroupState
}

// TestGoneMemberNotCountedRemoved: a stale record of a member the group
// does not know (its process had left) is not counted as removed.
func TestGoneMemberNotCountedRemoved(t *testing.T) {
	e := newKafkaEnv(t, 2)
	key := keys.KafkaMember(e.cfg.ConsumerGroup, "g")
	if err := e.rdb.Set(context.Background(), key, "deadbeef 1 gone-member-id", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	_, _ = e.consumer(e.memberConfig("g"), reg)
	testenv.WaitFor(t, 60*time.Second, "the group stable with the new member", func() bool {
		members, state := e.groupMembers()
		return state == "Stable" && len(members) == 1
	})
	if n := testenv.MetricValue(t, reg, "sluice_kafka_predecessors_removed_total", nil); n != 0 {
		t.Fatalf("sluice_kafka_predecessors_removed_total = %v, want 0 (the member was already gone)", n)
	}
}
