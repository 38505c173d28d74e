package scheduler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/scheduler"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// TestRefusedJobDeadLettered: a scheduled job the Kafka producer refuses
// (larger than a produce request takes: stored before ingest checked it)
// is dead-lettered when due, and the tenant's other due jobs move: before,
// its failed enqueue kept it leased and retaken first, and with it every
// job that shared its move, for good.
func TestRefusedJobDeadLettered(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.StartRedis(t).Addr()})
	t.Cleanup(func() { rdb.Close() })
	brokers := testenv.KafkaBrokers(t)
	topic := testenv.CreateTopic(t, brokers, 1)
	p, err := kafkaq.NewProducer(t.Context(), kafkaq.ProducerConfig{Kafka: kafkaq.Settings{
		Brokers: brokers, Topic: topic, Partitions: 1, ReplicationFactor: 1, ProduceTimeout: 5 * time.Second,
	}, Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	tn := testenv.Name(t, "big")
	due := time.Now().Add(100 * time.Millisecond)
	env := func(id string, payload string) scheduler.Job {
		return scheduler.Job{Due: due, Envelope: queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: tn, Type: "r", Cost: 1,
			EnqueuedAt: time.Now(), NotBefore: &due, Payload: []byte(`"` + payload + `"`)}}
	}
	jobs := []scheduler.Job{env("big", strings.Repeat("x", 1_010_000)), env("s1", "a"), env("s2", "b")}
	if err := scheduler.Add(ctx, rdb, tn, jobs, 100); err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{Redis: rdb, Producer: p, Interval: 20 * time.Millisecond, Lease: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rc, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(rc, func() []string { return []string{tn} }, func(string) {})
	}()
	testenv.WaitFor(t, 10*time.Second, "the small jobs moved", func() bool {
		a, _ := jobstate.Get(ctx, rdb, tn, "s1")
		b, _ := jobstate.Get(ctx, rdb, tn, "s2")
		return a.State == jobstate.Queued && b.State == jobstate.Queued
	})
	stop()
	<-done
	if rec, err := jobstate.Get(ctx, rdb, tn, "big"); err != nil || rec.State != jobstate.Dead || rec.Reason != "poison" {
		t.Errorf("the refused job: %+v (%v), want dead, reason poison", rec, err)
	}
	if letter := rdb.HGet(ctx, keys.DeadRecords(tn), "big").Val(); !strings.Contains(letter, "more than a Kafka request takes") {
		t.Errorf("the refused job's dead letter %.200q, want the producer's refusal", letter)
	}
	if n := rdb.ZCard(ctx, keys.ScheduledMoving(tn)).Val() + rdb.ZCard(ctx, keys.JobIndex(tn, "scheduled")).Val(); n != 0 {
		t.Errorf("%d jobs still scheduled or moving, want 0", n)
	}
}
