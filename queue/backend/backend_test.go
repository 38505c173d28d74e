package backend_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
	"github.com/sluicehq/sluice/queue/redisq"
)

// kafkaSettings is a fresh topic pair on the test Kafka.
func kafkaSettings(t *testing.T, partitions int) kafkaq.Settings {
	return kafkaq.Settings{
		Brokers: testenv.KafkaBrokers(t), Topic: testenv.Name(t, "jobs"), DLQTopic: testenv.Name(t, "dlq"),
		Partitions: partitions, ReplicationFactor: 1, ConsumerGroup: testenv.Name(t, "group"),
	}
}

func TestNewProducer(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tests := []struct {
		backend string
		want    string // the producer's type, or "error"
	}{
		{"", "*redisq.Producer"},
		{"redis", "*redisq.Producer"},
		{"kafka", "*kafkaq.Producer"},
		{"rabbitmq", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			t.Parallel()
			cfg := backend.Config{Backend: tt.backend, Redis: rdb, Registerer: prometheus.NewRegistry()}
			if tt.backend == "kafka" {
				cfg.Kafka = kafkaSettings(t, 2)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := backend.NewProducer(ctx, cfg)
			got := "error"
			if err == nil {
				got = fmt.Sprintf("%T", p)
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			if got != tt.want {
				t.Errorf("NewProducer(backend %q) = %s (%v), want %s", tt.backend, got, err, tt.want)
			}
		})
	}
}

func TestNewConsumer(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tests := []struct {
		backend string
		want    string // the consumer's type, or "error"
	}{
		{"", "*redisq.Consumer"},
		{"redis", "*redisq.Consumer"},
		{"kafka", "*kafkaq.Consumer"},
		{"rabbitmq", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			t.Parallel()
			cfg := backend.Config{Backend: tt.backend, Redis: rdb, Registerer: prometheus.NewRegistry()}
			if tt.backend == "kafka" {
				cfg.Kafka = kafkaSettings(t, 1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, run, err := backend.NewConsumer(ctx, cfg)
			got := "error"
			if err == nil {
				got = fmt.Sprintf("%T", c)
				rctx, stop := context.WithCancel(context.Background())
				stop()
				if err := run(rctx); err != nil {
					t.Errorf("run after its context ended: %v", err)
				}
			}
			if got != tt.want {
				t.Errorf("NewConsumer(backend %q) = %s (%v), want %s", tt.backend, got, err, tt.want)
			}
		})
	}
}

// TestProducersShareMetrics builds both producers on one registry: the
// second finds the metrics the first registered instead of failing.
func TestProducersShareMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	rdb := testenv.Redis(t)
	for range 2 {
		if _, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb, Registerer: reg}); err != nil {
			t.Fatalf("redisq.NewProducer on a shared registry: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := kafkaq.NewProducer(ctx, kafkaq.ProducerConfig{Kafka: kafkaSettings(t, 1), Redis: rdb, Registerer: reg})
	if err != nil {
		t.Fatalf("kafkaq.NewProducer on a shared registry: %v", err)
	}
	p.Close()
}
