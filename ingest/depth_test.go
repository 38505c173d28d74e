package ingest_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/redisq"
)

// TestIngestExportsQueueDepth: a serving ingest samples every configured
// tenant's backlog into sluice_queue_depth{tenant}, with no drainer running,
// and follows a change of the counter within a few samples.
func TestIngestExportsQueueDepth(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "depth")
	t.Cleanup(func() { rdb.Del(context.Background(), keys.Backlog(tenant)) })
	rdb.Set(context.Background(), keys.Backlog(tenant), 7, time.Minute)
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := ingest.New(ingest.Config{Settings: testConfig(t, tenantYAML(tenant, "")), Redis: rdb, Producer: producer,
		Admitter: adm, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })

	depth := func() float64 {
		return testenv.MetricValue(t, reg, "sluice_queue_depth", map[string]string{"tenant": tenant})
	}
	testenv.WaitFor(t, 5*time.Second, "sluice_queue_depth 7", func() bool { return depth() == 7 })
	rdb.Set(context.Background(), keys.Backlog(tenant), 3, time.Minute)
	testenv.WaitFor(t, 5*time.Second, "sluice_queue_depth 3 after the counter fell", func() bool { return depth() == 3 })
}
