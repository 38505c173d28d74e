package dlq_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
)

// deadJobs lists the tenant's dead letters (one page of limit), wanting 200.
func (st *stack) deadJobs(t *testing.T, query string) ([]map[string]any, string) {
	t.Helper()
	a := st.admin(t, "GET", query, "")
	if a.status != http.StatusOK {
		t.Fatalf("GET dlq%s: %d %s", query, a.status, a.body)
	}
	m := a.json(t)
	var out []map[string]any
	for _, j := range m["jobs"].([]any) {
		out = append(out, j.(map[string]any))
	}
	next, _ := m["next_cursor"].(string)
	return out, next
}

// waitDead waits until the tenant has n dead letters.
func (st *stack) waitDead(t *testing.T, n int) {
	t.Helper()
	testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("%d dead letters", n), func() bool {
		jobs, _ := st.deadJobs(t, "?limit=100")
		return len(jobs) == n
	})
}

// TestDeadLetterLifecycle: a job the sink rejects is listed with its
// fields, shown with its payload and response, counted in stats, and
// redriven: delivered again with the same id and Sluice-Attempt 1, gone
// from the DLQ, counted and audited. On both backends.
func TestDeadLetterLifecycle(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			st := startStack(t, b)
			st.sink.setReject("bad", true)
			st.submit(t, "bad", `{"to":"x@example.com"}`)
			st.submit(t, "good", `{"to":"y@example.com"}`)
			st.waitDead(t, 1)

			jobs, next := st.deadJobs(t, "")
			j := jobs[0]
			failedAt, err := time.Parse(time.RFC3339, fmt.Sprint(j["failed_at"]))
			if err != nil || time.Since(failedAt) > time.Minute {
				t.Errorf("failed_at %v (%v), want an RFC 3339 time of the last minute", j["failed_at"], err)
			}
			delete(j, "failed_at")
			want := map[string]any{"job_id": "bad", "type": "email", "reason": "rejected", "status": 422.0, "attempts": 1.0,
				"last_error": j["last_error"], "excerpt": `{"to":"x@example.com"}`, "excerpt_truncated": false, "truncated": false}
			if diff := cmp.Diff(want, j); diff != "" || next != "" || !strings.Contains(fmt.Sprint(j["last_error"]), "422") {
				t.Errorf("listed dead letter (-want +got):\n%s\nlast_error %v, next_cursor %q", diff, j["last_error"], next)
			}
			if n := st.dlqCount(t); n != 1 {
				t.Errorf("stats dlq = %d, want 1 (the list's length)", n)
			}
			one := st.admin(t, "GET", "/bad", "")
			if m := one.json(t); one.status != 200 || fmt.Sprint(m["payload"]) != "map[to:x@example.com]" ||
				!strings.Contains(fmt.Sprint(m["response"]), "no such customer") || m["tenant"] != st.tenant {
				t.Errorf("GET dlq/bad: %d %s", one.status, one.body)
			}
			if a := st.admin(t, "GET", "/nope", ""); a.status != 404 {
				t.Errorf("GET dlq/nope: %d %s, want 404", a.status, a.body)
			}

			st.sink.setReject("bad", false)
			a := st.admin(t, "POST", ":redrive", `{"job_ids":["bad","unknown"]}`)
			if a.status != 200 || string(a.body) != `{"redriven":1,"skipped":[]}`+"\n" {
				t.Fatalf("redrive: %d %s, want {\"redriven\":1,\"skipped\":[]}", a.status, a.body)
			}
			testenv.WaitFor(t, 30*time.Second, "the redriven job delivered", func() bool { return len(st.sink.deliveries("bad")) == 2 })
			if d := st.sink.deliveries("bad")[1]; d.attempt != "1" || d.body != `{"to":"x@example.com"}` {
				t.Errorf("redriven delivery: attempt %s body %s, want attempt 1 and the payload", d.attempt, d.body)
			}
			if jobs, _ := st.deadJobs(t, ""); len(jobs) != 0 {
				t.Errorf("DLQ after the redrive: %v, want empty", jobs)
			}
			if n := st.dlqCount(t); n != 0 {
				t.Errorf("stats dlq after the redrive = %d, want 0", n)
			}
			if v := testenv.MetricValue(t, st.reg, "sluice_dlq_redriven_total", map[string]string{"tenant": st.tenant}); v != 1 {
				t.Errorf("sluice_dlq_redriven_total = %v, want 1", v)
			}
			st.wantAudit(t, "dlq_redrive", 1)
		})
	}
}

// wantAudit checks the tenant's newest audit entry.
func (st *stack) wantAudit(t *testing.T, action string, count int) {
	t.Helper()
	a := st.do(t, "GET", "/admin/v1/tenants/"+st.tenant+"/audit?limit=1", adminToken, "")
	entries, _ := a.json(t)["entries"].([]any)
	if len(entries) != 1 {
		t.Fatalf("audit: %d %s", a.status, a.body)
	}
	e := entries[0].(map[string]any)
	if e["action"] != action || e["count"] != float64(count) || e["who"] != "alice" {
		t.Errorf("newest audit entry %v, want action %s count %d by alice", e, action, count)
	}
}

// TestDeadLetterPagingAndDelete pages through dead letters newest first
// while another one arrives (no item shifts or repeats), then deletes one
// (again: 404) and all. On both backends.
func TestDeadLetterPagingAndDelete(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			t.Parallel()
			st := startStack(t, b)
			for i := range 6 {
				st.sink.setReject(fmt.Sprintf("d%d", i), true)
			}
			for i := range 5 {
				st.submit(t, fmt.Sprintf("d%d", i), `{"n":`+fmt.Sprint(i)+`}`)
				st.waitDead(t, i+1) // one by one: each dies later than the one before
			}
			page, next := st.deadJobs(t, "?limit=2")
			st.submit(t, "d5", `{"n":5}`)
			st.waitDead(t, 6)
			var got []string
			for {
				for _, j := range page {
					got = append(got, j["job_id"].(string))
				}
				if next == "" {
					break
				}
				page, next = st.deadJobs(t, "?limit=2&cursor="+next)
			}
			if diff := cmp.Diff([]string{"d4", "d3", "d2", "d1", "d0"}, got); diff != "" {
				t.Errorf("pages from before d5 died, newest first (-want +got):\n%s", diff)
			}
			if a := st.admin(t, "GET", "?cursor=nonsense", ""); a.status != 400 {
				t.Errorf("a bad cursor: %d %s, want 400", a.status, a.body)
			}
			for _, q := range []string{"?limit=1&limit=2", "?cursor=" + next + "&cursor=x"} {
				if a := st.admin(t, "GET", q, ""); a.status != 400 || !strings.Contains(string(a.body), "given 2 times") {
					t.Errorf("GET dlq%s: %d %s, want 400, a parameter given 2 times", q, a.status, a.body)
				}
			}
			if a := st.admin(t, "DELETE", "/d0", ""); a.status != 200 || string(a.body) != `{"deleted":1}`+"\n" {
				t.Errorf("DELETE dlq/d0: %d %s", a.status, a.body)
			}
			st.wantAudit(t, "dlq_delete", 1)
			if a := st.admin(t, "DELETE", "/d0", ""); a.status != 404 {
				t.Errorf("DELETE dlq/d0 again: %d %s, want 404", a.status, a.body)
			}
			if a := st.admin(t, "DELETE", "", ""); a.status != 200 || string(a.body) != `{"deleted":5}`+"\n" {
				t.Errorf("DELETE dlq: %d %s, want 5 deleted", a.status, a.body)
			}
			if n := st.dlqCount(t); n != 0 {
				t.Errorf("stats dlq after deleting all = %d, want 0", n)
			}
			if v := testenv.MetricValue(t, st.reg, "sluice_dlq_deleted_total", map[string]string{"tenant": st.tenant}); v != 6 {
				t.Errorf("sluice_dlq_deleted_total = %v, want 6", v)
			}
			st.wantAudit(t, "dlq_delete", 5)
		})
	}
}
