package kafkaq_test

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// TestKafkaDrainerDeadLettersJobsLargerThanTheBucket is the Kafka twin of
// drainer's TestDrainerDeadLettersJobsLargerThanTheBucket: envelopes of
// cost 2^63−1 and of capacity + 1, produced to the topic directly (as an
// older ingest might have), ahead of a normal job, reach the DLQ topic with
// reason cost_exceeds_capacity, the normal job is delivered, every offset
// is committed, and the idle drainer then makes at most 10 script calls in
// 2 s on its private Redis (the Kafka consumer claims from memory; the
// wedge this guards against made thousands a second).
func TestKafkaDrainerDeadLettersJobsLargerThanTheBucket(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	e.rdb = rdb // the consumer's and the drainer's Redis: this test's alone
	ctx := context.Background()
	tenant := testenv.Name(t, "big")

	var recs []kafka.Record
	for _, j := range []queue.Envelope{
		{ID: "max", Tenant: tenant, Type: "t", Cost: math.MaxInt64},
		{ID: "six", Tenant: tenant, Type: "t", Cost: 6},
		{ID: "ok", Tenant: tenant, Type: "t", Cost: 1},
	} {
		j.Version = queue.EnvelopeVersion
		b, err := j.Encode()
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, kafka.Record{Key: kafka.NewBytes([]byte(tenant)), Value: kafka.NewBytes(b),
			Headers: []kafka.Header{{Key: kafkaq.HeaderTenant, Value: []byte(tenant)}, {Key: kafkaq.HeaderJobID, Value: []byte(j.ID)}}})
	}
	fresh := &kafka.Client{Addr: kafka.TCP(e.cfg.Brokers...), Transport: &kafka.Transport{}}
	res, err := fresh.Produce(ctx, &kafka.ProduceRequest{Topic: e.cfg.Topic, Partition: 0, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(recs...)})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	if err != nil {
		t.Fatal(err)
	}

	c, _ := e.consumer(e.consumerConfig(), nil)
	delivered := newDeliveries()
	runDrainer(t, c, rdb, map[string]config.Tenant{tenant: {Outflow: config.Outflow{Rate: 10, Capacity: 5}}},
		drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
			delivered.add(job.ID)
			return nil
		}))
	testenv.WaitFor(t, 15*time.Second, "commit past all 3 messages", func() bool { return e.committed(1)[0] == 3 })

	var got []string
	for _, m := range e.readAll(e.cfg.DLQTopic, 1) {
		var dl queue.DeadLetter
		if err := json.Unmarshal(m.Value, &dl); err != nil {
			t.Fatalf("dead letter %s does not decode: %v", m.Value, err)
		}
		header := ""
		for _, h := range m.Headers {
			if h.Key == kafkaq.HeaderDLQReason {
				header = string(h.Value)
			}
		}
		env, err := queue.Decode(dl.Job)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, env.ID+" "+dl.Reason+" "+header)
	}
	sort.Strings(got)
	want := []string{"max cost_exceeds_capacity cost_exceeds_capacity", "six cost_exceeds_capacity cost_exceeds_capacity"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	if u, total := delivered.counts(); u != 1 || total != 1 {
		t.Errorf("handler saw %d jobs (%d deliveries), want only ok, once", u, total)
	}
	if ttl := rdb.PTTL(ctx, keys.Water(tenant)).Val(); ttl <= 0 {
		t.Errorf("water key PTTL = %v, want > 0", ttl)
	}

	time.Sleep(300 * time.Millisecond)
	before := testenv.CommandCalls(t, rdb, "evalsha", "eval")
	time.Sleep(2 * time.Second)
	n := testenv.CommandCalls(t, rdb, "evalsha", "eval") - before
	t.Logf("idle drainer on Kafka: %d script calls in 2s", n)
	if n > 10 {
		t.Errorf("idle drainer made %d script calls in 2s, want ≤ 10", n)
	}
}
