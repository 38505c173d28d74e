package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/freeport"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// buildDrainer builds cmd/drainer once into dir and returns the binary.
func buildDrainer(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "drainer")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/drainer")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("drainbench: go build ./cmd/drainer: %w: %s", err, out)
	}
	return bin, nil
}

// drainerConf is what a generated drainer configuration varies.
type drainerConf struct {
	redisAddr string
	backend   string // redis | kafka
	brokers   []string
	topic     string // kafka
	group     string // kafka consumer group
	listen    string // ops endpoints, one port per process
	tenants   []string
	rate      float64 // 0: outflow.unlimited; capacity is left to its default
	sinkURL   string
	pprof     bool // drainer.pprof: /debug/pprof on the ops listener
	paused    bool // every tenant outflow.paused (startStableKafka)
}

// yaml renders the configuration file. Only what differs from the defaults
// is written, so outflow.capacity is the default max(1, rate) and
// outflow.adaptive the default true (the sink never answers 429/503).
func (c drainerConf) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redis: {addr: %q}\n", c.redisAddr)
	fmt.Fprintf(&b, "queue: {backend: %s}\n", c.backend)
	if c.backend == "kafka" {
		fmt.Fprintf(&b, "kafka: {brokers: [%s], topic: %q, dlq_topic: %q, consumer_group: %q}\n",
			strings.Join(c.brokers, ", "), c.topic, c.topic+dlqSuffix, c.group)
	}
	if c.pprof {
		fmt.Fprintf(&b, "drainer: {listen: %q, shutdown_timeout: 10s, pprof: true}\n", c.listen)
	} else {
		fmt.Fprintf(&b, "drainer: {listen: %q, shutdown_timeout: 10s}\n", c.listen)
	}
	b.WriteString("tenants:\n")
	for _, t := range c.tenants {
		fmt.Fprintf(&b, "  %s:\n", t)
		pause := ""
		if c.paused {
			pause = ", paused: true"
		}
		if c.rate > 0 {
			fmt.Fprintf(&b, "    outflow: {rate: %s%s}\n", strconv.FormatFloat(c.rate, 'f', -1, 64), pause)
		} else {
			fmt.Fprintf(&b, "    outflow: {unlimited: true%s}\n", pause)
		}
		fmt.Fprintf(&b, "    target: {url: %q}\n", c.sinkURL)
	}
	return b.String()
}

// startFleet starts n drainers of c's backend. On Kafka they start paused
// and resume once their group is Stable (startStableKafka), and the note
// says how long that took; on Redis they start at once, with no note.
func (b *bench) startFleet(ctx context.Context, name string, n int, c drainerConf) (fleet, string, error) {
	if c.backend != "kafka" {
		f, err := startDrainers(b.bin, b.dir, name, n, c)
		return f, "", err
	}
	f, settled, err := b.startStableKafka(ctx, name, n, c)
	if err != nil {
		return nil, "", err
	}
	return f, fmt.Sprintf("drainers started paused; group stable after %.1fs, then resumed", settled.Seconds()), nil
}

// startDrainers writes one configuration per process (each with its own ops
// port) into dir and starts n drainers.
func startDrainers(bin, dir, name string, n int, c drainerConf) (fleet, error) {
	var f fleet
	for i := range n {
		addr, err := freeport.LoopbackAddr()
		if err != nil {
			f.stop(5 * time.Second)
			return nil, err
		}
		c.listen = addr
		path := filepath.Join(dir, fmt.Sprintf("%s-%d.yaml", name, i))
		if err := os.WriteFile(path, []byte(c.yaml()), 0o644); err != nil {
			f.stop(5 * time.Second)
			return nil, fmt.Errorf("drainbench: write %s: %w", path, err)
		}
		p, err := startProc(fmt.Sprintf("drainer %d of %s", i, name), filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, i)),
			nil, bin, "--config", path)
		if err != nil {
			f.stop(5 * time.Second)
			return nil, err
		}
		p.addr = addr
		f = append(f, p)
	}
	return f, nil
}

// jobs returns n envelopes spread round-robin over tenants, ids
// "<tenant>-<i>", payload {}.
func jobs(tenants []string, from, n int) []queue.Envelope {
	out := make([]queue.Envelope, 0, n)
	for i := from; i < from+n; i++ {
		t := tenants[i%len(tenants)]
		out = append(out, queue.Envelope{Version: queue.EnvelopeVersion, ID: t + "-" + strconv.Itoa(i), Tenant: t, Cost: 1, Payload: []byte(`{}`)})
	}
	return out
}

// preload enqueues n jobs over tenants with p, 1000 per Enqueue call.
func preload(ctx context.Context, p queue.Producer, tenants []string, n int) error {
	for from := 0; from < n; from += 1000 {
		if err := p.Enqueue(ctx, jobs(tenants, from, min(1000, n-from))); err != nil {
			return fmt.Errorf("drainbench: preload %d jobs: %w", n, err)
		}
	}
	return nil
}

// preloadRedis queues n jobs on the tenants' Redis lists with sluice's
// producer (list and backlog counter in one script, as ingest writes them).
func preloadRedis(ctx context.Context, rdb redis.UniversalClient, tenants []string, n int) error {
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		return err
	}
	if err := lua.LoadAll(ctx, rdb); err != nil {
		return err
	}
	return preload(ctx, p, tenants, n)
}

// kafkaPartitions is the partition count of the benchmark's topics (the
// configuration's default).
const kafkaPartitions = 12

// preloadKafka creates topic and produces n jobs to it with sluice's Kafka
// producer (key = tenant, acks=all), backlog counters in rdb.
func preloadKafka(ctx context.Context, rdb redis.UniversalClient, brokers []string, topic string, tenants []string, n int) error {
	p, err := kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{
		Kafka: kafkaq.Settings{Brokers: brokers, Topic: topic, Partitions: kafkaPartitions, ReplicationFactor: 1,
			ProduceTimeout: 10 * time.Second},
		Redis: rdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	defer p.Close()
	return preload(ctx, p, tenants, n)
}

// dlqSuffix names a benchmark topic's dead-letter topic.
const dlqSuffix = ".dlq"

// deleteTopics removes a row's topics from the broker (those that exist);
// a failure is logged, as the row's figures stand.
func (b *bench) deleteTopics(ctx context.Context, topics ...string) {
	c := &kafka.Client{Addr: kafka.TCP(b.o.kafkaBrokers...), Timeout: 10 * time.Second}
	res, err := c.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
	if err != nil {
		b.logf("delete topics %v: %v", topics, err)
		return
	}
	for t, err := range res.Errors {
		if err != nil && !errors.Is(err, kafka.UnknownTopicOrPartition) {
			b.logf("delete topic %s: %v", t, err)
		}
	}
}

// deletePattern deletes every key matching pattern (SCAN + DEL).
func deletePattern(ctx context.Context, rdb *redis.Client, pattern string) error {
	it := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for it.Next(ctx) {
		batch = append(batch, it.Val())
		if len(batch) == 1000 {
			if err := rdb.Del(ctx, batch...).Err(); err != nil {
				return fmt.Errorf("drainbench: delete %s: %w", pattern, err)
			}
			batch = batch[:0]
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("drainbench: scan %s: %w", pattern, err)
	}
	if len(batch) > 0 {
		if err := rdb.Del(ctx, batch...).Err(); err != nil {
			return fmt.Errorf("drainbench: delete %s: %w", pattern, err)
		}
	}
	return nil
}

// deleteTenants removes every key of the tenants (queue, leases, bucket...).
func deleteTenants(ctx context.Context, rdb *redis.Client, tenants []string) error {
	for _, t := range tenants {
		if err := deletePattern(ctx, rdb, "sluice:{"+t+"}:*"); err != nil {
			return err
		}
	}
	return nil
}

// tenantNames returns n tenant ids starting with base.
func tenantNames(base string, n int) []string {
	if n == 1 {
		return []string{base}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-t%d", base, i)
	}
	return out
}
