package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
)

func TestNew(t *testing.T) {
	rdb := testenv.Redis(t)
	tests := []struct {
		backend string
		want    string // the producer's type, or "error"
	}{
		{"", "*queue.RedisProducer"},
		{"redis", "*queue.RedisProducer"},
		{"kafka", "*queue.KafkaProducer"},
		{"rabbitmq", "error"},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			cfg := &config.Config{Queue: config.Queue{Backend: tt.backend}}
			if tt.backend == "kafka" {
				cfg.Kafka = kafkaTestConfig(t, testenv.KafkaBrokers(t), 2)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := New(ctx, cfg, ProducerDeps{Redis: rdb, Registerer: prometheus.NewRegistry()})
			got := "error"
			if err == nil {
				got = fmt.Sprintf("%T", p)
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}
			if got != tt.want {
				t.Errorf("New(backend %q) = %s (%v), want %s", tt.backend, got, err, tt.want)
			}
		})
	}
}

// TestProducersShareMetrics builds both producers on one registry: the
// second finds the metrics the first registered instead of failing.
func TestProducersShareMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rdb := testenv.Redis(t)
	for range 2 {
		if _, err := NewRedisProducer(rdb, reg); err != nil {
			t.Fatalf("NewRedisProducer on a shared registry: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := NewKafkaProducer(ctx, kafkaTestConfig(t, testenv.KafkaBrokers(t), 1), ProducerDeps{Redis: rdb, Registerer: reg})
	if err != nil {
		t.Fatalf("NewKafkaProducer on a shared registry: %v", err)
	}
	p.Close()
}
