package testenv

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"
)

func TestStartRedis(t *testing.T) {
	r := StartRedis(t)
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialerRetries: 1, ReadTimeout: 200 * time.Millisecond})
	defer c.Close()
	ctx := t.Context()
	alive := func() error { return c.Ping(ctx).Err() }

	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	r.Pause()
	if err := alive(); err == nil {
		t.Errorf("paused: ping succeeded, want a timeout")
	}
	r.Resume()
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("resumed: get k = %q, %v; want %q", got, err, "v")
	}
	r.Stop()
	if err := alive(); err == nil {
		t.Errorf("stopped: ping succeeded")
	}
	r.Start()
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Errorf("restarted: get k: %v, want redis.Nil (no persistence)", err)
	}
	r.Kill()
	if err := alive(); err == nil {
		t.Errorf("killed: ping succeeded")
	}
	r.Start()
	if err := alive(); err != nil {
		t.Errorf("restarted after kill: %v", err)
	}
}

// TestStartKafka shows that messages acknowledged with acks=all survive a
// SIGKILL and a clean stop of the private broker, that it serves again
// after each restart, and that a paused broker answers nothing until it is
// resumed. It takes ≈20 s, mostly waiting for the restarts. (StartKafkaCluster
// and its LeaderOf/ActiveController are exercised by
// internal/kafkaclustertest.)
func TestStartKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a Kafka broker (≈20 s)")
	}
	k := StartKafka(t)
	topic := CreateTopic(t, k.Brokers(), 1)
	write := func(from, to int) {
		t.Helper()
		// Its own Transport: kafka.DefaultTransport caches metadata across
		// writers, and one read while the broker restarted ("no leader")
		// failed the next write although waitLeader had seen the leader.
		w := &kafka.Writer{Addr: kafka.TCP(k.Brokers()...), Topic: topic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
			Transport: &kafka.Transport{}}
		defer w.Close()
		var msgs []kafka.Message
		for i := from; i < to; i++ {
			msgs = append(msgs, kafka.Message{Value: fmt.Appendf(nil, "m%d", i)})
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatalf("write m%d..m%d: %v", from, to-1, err)
		}
	}
	// After a restart the broker answers before it has elected the
	// partition's leader again: writes wait for the leader.
	waitLeader := func() {
		t.Helper()
		c := &kafka.Client{Addr: kafka.TCP(k.Addr()), Transport: &kafka.Transport{}}
		WaitFor(t, 30*time.Second, "a leader for "+topic, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
			return err == nil && len(md.Topics) == 1 && len(md.Topics[0].Partitions) == 1 &&
				md.Topics[0].Partitions[0].Error == nil && md.Topics[0].Partitions[0].Leader.ID >= 0 &&
				md.Topics[0].Partitions[0].Leader.Host != ""
		})
	}
	readAll := func(n int) []string {
		t.Helper()
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: k.Brokers(), Topic: topic, MaxWait: 250 * time.Millisecond})
		defer r.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var got []string
		for len(got) < n {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				t.Fatalf("read after %d of %d: %v", len(got), n, err)
			}
			got = append(got, string(m.Value))
		}
		return got
	}
	want := func(n int) []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("m%d", i))
		}
		return s
	}

	write(0, 10)
	k.Kill()
	if conn, err := net.DialTimeout("tcp", k.Addr(), time.Second); err == nil {
		conn.Close()
		t.Fatalf("a killed broker still accepts connections on %s", k.Addr())
	}
	k.Start()
	waitLeader()
	write(10, 15)
	if diff := cmp.Diff(want(15), readAll(15)); diff != "" {
		t.Errorf("after SIGKILL and restart (-want +got):\n%s", diff)
	}
	k.Pause()
	client := &kafka.Client{Addr: kafka.TCP(k.Addr()), Transport: &kafka.Transport{}}
	metadata := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
		return err
	}
	if err := metadata(); err == nil {
		t.Errorf("paused: a Metadata request was answered, want a timeout")
	}
	k.Resume()
	WaitFor(t, 10*time.Second, "a Metadata answer after Resume", func() bool { return metadata() == nil })
	k.Stop()
	k.Start()
	waitLeader()
	write(15, 20)
	if diff := cmp.Diff(want(20), readAll(20)); diff != "" {
		t.Errorf("after stop and restart (-want +got):\n%s", diff)
	}
}
