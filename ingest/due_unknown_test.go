package ingest_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestUnknownScheduledRetriedAfterDue: a job with not_before whose store was
// a 503 with an unknown outcome (a short WAIT), retried with the same body
// once its due time has passed, is the same job (202 with its id and
// enqueued_at), not another job under the id (422): the request's
// not_before is what the retry is compared by, not whether it is still
// ahead.
func TestUnknownScheduledRetriedAfterDue(t *testing.T) {
	t.Parallel()
	_, replica, rdb := startReplicated(t)
	tenant := testenv.Name(t, "dueu")
	cfg := testConfig(t, tenantYAML(tenant, ""))
	cfg.Redis.WaitReplicas, cfg.Redis.WaitTimeout = 1, 100*time.Millisecond
	h := startIngest(t, cfg, deps{rdb: rdb})
	due := time.Now().Add(400 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	body := fmt.Sprintf(`{"type":"t","id":"s1","not_before":%q}`, due)
	ctx := context.Background()

	replica.Pause()
	a := h.post(t, tenant, "/v1/jobs", body)
	replica.Resume()
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("short WAIT of a scheduled job: %d %s, want 503", a.status, a.body)
	}
	at1 := rdb.HGet(ctx, keys.JobState(tenant, "s1"), "enqueued_at").Val()
	testenv.WaitFor(t, 10*time.Second, "the replica in sync again", func() bool {
		n, err := rdb.Do(ctx, "WAIT", 1, 100).Int64()
		return err == nil && n == 1
	})
	time.Sleep(500 * time.Millisecond) // past the due time
	a = h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusAccepted || a.json(t)["job_id"] != "s1" {
		t.Fatalf("retry after the due time: %d %s, want 202 for s1", a.status, a.body)
	}
	if at := rdb.HGet(ctx, keys.JobState(tenant, "s1"), "enqueued_at").Val(); at != at1 {
		t.Errorf("enqueued_at %s after the retry, want the first %s", at, at1)
	}
}
