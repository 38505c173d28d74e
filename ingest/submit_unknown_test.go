package ingest_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
)

// lostReply is a go-redis hook that lets the first submit.lua call run on
// the server, then drops its reply as a read timeout would: the outcome of
// a script that ran and whose answer was lost.
type lostReply struct{ dropped atomic.Bool }

func (*lostReply) DialHook(next redis.DialHook) redis.DialHook { return next }

func (*lostReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *lostReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err == nil && len(args) > 1 && cmd.Name() == "evalsha" && args[1] == lua.SubmitFor("gcra.lua").SHA() &&
			h.dropped.CompareAndSwap(false, true) {
			err = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
			cmd.SetErr(err)
		}
		return err
	}
}

// TestSubmitUnknownOutcome: on the Redis backend with admission, queue and
// ids on one Redis (the one-call path), a submit whose reply is lost is a
// 503 with an unknown outcome; the script ran, so the job and its policy
// charge exist together, and a retry with the same id answers 202 with the
// same job id and enqueued_at while the queue holds the job once.
func TestSubmitUnknownOutcome(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	if err := lua.LoadAll(context.Background(), rdb); err != nil {
		t.Fatal(err)
	}
	hook := &lostReply{}
	rdb.AddHook(hook)
	tenant := testenv.Name(t, "sunk")
	cfg := testConfig(t, tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 100, period: 1s, burst: 100}\n"))
	h := startIngest(t, cfg, deps{rdb: rdb})

	body := `{"type":"t","id":"u1"}`
	a := h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusServiceUnavailable || !hook.dropped.Load() {
		t.Fatalf("lost reply: %d %s (dropped %v), want 503", a.status, a.body, hook.dropped.Load())
	}
	q := queued(t, rdb, tenant)
	if len(q) != 1 || q[0].ID != "u1" {
		t.Fatalf("queued %+v, want job u1 once: the script ran", q)
	}
	a = h.post(t, tenant, "/v1/jobs", body)
	if a.status != http.StatusAccepted {
		t.Fatalf("retry: %d %s, want 202", a.status, a.body)
	}
	var got struct {
		JobID      string `json:"job_id"`
		EnqueuedAt string `json:"enqueued_at"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil {
		t.Fatal(err)
	}
	q = queued(t, rdb, tenant)
	if len(q) != 1 || got.JobID != "u1" || got.EnqueuedAt != q[0].EnqueuedAt.Format("2006-01-02T15:04:05.999999999Z07:00") {
		t.Errorf("retry answered %+v, queue %+v; want job u1 once with the first enqueued_at", got, q)
	}
	if a := h.post(t, tenant, "/v1/jobs", body); a.status != http.StatusAccepted || a.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("third send: %d replayed %q, want the stored 202", a.status, a.header.Get("Idempotent-Replayed"))
	}
}
