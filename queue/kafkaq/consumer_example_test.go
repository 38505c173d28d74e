package kafkaq_test

import (
	"context"
	"fmt"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// ExampleNewConsumer drains the Kafka backend with a drainer until
// SIGTERM, in the shutdown order the consumer needs: the drainer first
// (in-flight jobs finish or go back to the queue), then the consumer
// (commits its partitions and leaves the group).
func ExampleNewConsumer() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	tenants := map[string]config.Tenant{
		"acme": {Outflow: config.Outflow{Rate: 5}, Target: config.Target{URL: "http://127.0.0.1:9000/jobs", Timeout: 10 * time.Second}},
	}

	c, err := kafkaq.NewConsumer(ctx, kafkaq.ConsumerConfig{
		Kafka: kafkaq.Settings{
			Brokers: []string{"127.0.0.1:9092"}, Topic: "sluice.jobs", DLQTopic: "sluice.dlq",
			Partitions: 12, ReplicationFactor: 1, ConsumerGroup: "sluice-drainer",
		},
		Tenants: []string{"acme"},
		Redis:   rdb, Logger: slog.Default(), Registerer: prometheus.DefaultRegisterer,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := drainer.New(drainer.Config{Consumer: c, Redis: rdb, Tenants: tenants, Registerer: prometheus.DefaultRegisterer})
	if err != nil {
		fmt.Println(err)
		return
	}
	consumerCtx, stopConsumer := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	go func() { consumed <- c.Run(consumerCtx) }()

	err = d.Run(ctx) // until SIGTERM
	stopConsumer()
	fmt.Println("drainer:", err, "consumer:", <-consumed)
}
