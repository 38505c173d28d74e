package ingest_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
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
	srv, reg := newServer(t, testConfig(t, tenantYAML(tenant, "")), deps{rdb: rdb})
	serve(t, srv, nil)

	depth := func() float64 {
		return testenv.MetricValue(t, reg, "sluice_queue_depth", map[string]string{"tenant": tenant})
	}
	testenv.WaitFor(t, 5*time.Second, "sluice_queue_depth 7", func() bool { return depth() == 7 })
	rdb.Set(context.Background(), keys.Backlog(tenant), 3, time.Minute)
	testenv.WaitFor(t, 5*time.Second, "sluice_queue_depth 3 after the counter fell", func() bool { return depth() == 3 })
}
