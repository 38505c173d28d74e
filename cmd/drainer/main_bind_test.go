package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/testenv"
)

// groupMembers returns the member ids of k's group (DescribeGroups).
func (k *kafkaSetup) groupMembers(t *testing.T) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := k.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{k.cfg.ConsumerGroup}})
	if err != nil || len(r.Groups) != 1 {
		t.Fatalf("describe group %s: %v (%+v)", k.cfg.ConsumerGroup, err, r)
	}
	var ids []string
	for _, m := range r.Groups[0].Members {
		ids = append(ids, m.MemberID)
	}
	return ids
}

// TestKafkaSecondDrainerOnTheSamePortExits: a second drainer started with
// the config of a running one (the same drainer.listen, so the same
// kafka.instance_id auto) fails to bind its ops port and exits before it
// joins the queue: the running drainer's group member stays as it was. The
// running one is paused (SIGSTOP) meanwhile, so its member record looks
// stale, as a crashed predecessor's: a second process that reached the
// consumer's start would remove it from the group.
func TestKafkaSecondDrainerOnTheSamePortExits(t *testing.T) {
	k := newKafkaSetup(t, 1)
	tenant := testenv.Name(t, "kbind")
	k.produce(t, []string{tenant}, 1)
	sink := newCountingSink(t, 0)
	cfg := k.writeConfig(t, []string{tenant}, sink.srv.URL, "")
	first := start(t, cfg)
	var before []string
	testenv.WaitFor(t, 90*time.Second, "the first drainer in the group, its job delivered", func() bool {
		unique, _ := sink.counts()
		before = k.groupMembers(t)
		return unique == 1 && len(before) == 1
	})
	first.Process.Signal(syscall.SIGSTOP)
	second := start(t, cfg)
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("second drainer on a bound port exited 0, want a failure")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("second drainer on a bound port still runs after 20s")
	}
	time.Sleep(2 * time.Second) // a removal would be done by now
	first.Process.Signal(syscall.SIGCONT)
	if after := k.groupMembers(t); len(after) != 1 || after[0] != before[0] {
		t.Errorf("group members %v after the second drainer exited, want the first one's %v unchanged", after, before)
	}
}
