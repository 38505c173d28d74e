package kafkaq_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// ExampleNewProducer builds the Kafka producer; the topic is created
// with 12 partitions if it does not exist yet.
func ExampleNewProducer() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	p, err := kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{
		Kafka: kafkaq.Settings{Brokers: []string{"127.0.0.1:9092"}, Topic: "sluice.jobs",
			Partitions: 12, ReplicationFactor: 1, BatchTimeout: 2 * time.Millisecond},
		Redis: rdb, Logger: slog.Default(), Registerer: prometheus.DefaultRegisterer,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	err = p.Enqueue(ctx, []queue.Envelope{{ID: "job-1", Tenant: "acme", Cost: 1}})
	fmt.Println(err)
}

// ExampleEnsureTopic creates a dead-letter topic the way the producer
// creates its own: with the configured partitions when it is absent (and
// the replication factor min(3, brokers), min.insync.replicas 2 from 3
// replicas on), then waiting for every partition's leader.
func ExampleEnsureTopic() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &kafka.Client{Addr: kafka.TCP("127.0.0.1:9092"), Timeout: 5 * time.Second}
	err := kafkaq.EnsureTopic(ctx, client, kafkaq.TopicSpec{Name: "sluice.dlq", Partitions: 3}, slog.Default())
	fmt.Println(err)
}
