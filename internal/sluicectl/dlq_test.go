package sluicectl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// kill writes a dead letter of tenant's job id as a drainer's finish does.
func (s *stack) kill(t *testing.T, tenant, id string, at time.Time) {
	t.Helper()
	env := queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: tenant, Type: "email", Cost: 1,
		Payload: json.RawMessage(`{"to":"` + id + `@example.com"}`), EnqueuedAt: at}
	raw, _ := env.Encode()
	rec, err := dlq.Encode(queue.DeadLetter{Reason: "rejected", Status: 422, Attempts: 1, Error: "status 422",
		Response: "no such customer", At: at}, raw)
	if err != nil {
		t.Fatal(err)
	}
	c := jobstate.Settle{Tenant: tenant, JobID: id, Member: id + "|1", State: jobstate.Dead, Reason: "rejected",
		DeadLetter: rec, DiedAt: at}.Call()
	if err := c.Run(context.Background(), s.rdb).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestDLQCommands lists, shows, redrives and deletes dead letters.
func TestDLQCommands(t *testing.T) {
	t.Parallel()
	tn := testenv.Name(t, "dq")
	s := startAdminStack(t, tenantYAML(tn, "    target: {url: 'http://127.0.0.1:9/hook'}\n"))
	t0 := time.Now().Add(-time.Minute)
	for i, id := range []string{"a", "b", "c"} {
		s.kill(t, tn, id, t0.Add(time.Duration(i)*time.Second))
	}
	env := map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}
	r := run(t, s.url, "", env, "dlq", "list", tn, "--limit", "2")
	if r.code != 0 || !strings.Contains(r.stdout, "JOB") || strings.Index(r.stdout, "\nc ") > strings.Index(r.stdout, "\nb ") ||
		strings.Contains(r.stdout, "\na ") || !strings.Contains(r.stderr, "--cursor ") {
		t.Fatalf("dlq list --limit 2: %+v, want c then b and a next cursor", r)
	}
	cursor := strings.TrimSpace(r.stderr[strings.Index(r.stderr, "--cursor ")+len("--cursor "):])
	if r := run(t, s.url, "", env, "dlq", "list", tn, "--cursor", cursor); r.code != 0 || !strings.Contains(r.stdout, "\na ") {
		t.Errorf("dlq list --cursor: %+v, want a", r)
	}
	if r := run(t, s.url, "", env, "dlq", "show", tn, "b"); r.code != 0 || !strings.Contains(r.stdout, `"to": "b@example.com"`) ||
		!strings.Contains(r.stdout, "no such customer") {
		t.Errorf("dlq show: %+v", r)
	}
	if r := run(t, s.url, "", env, "dlq", "redrive", tn, "b"); r.code != 0 || r.stdout != "redriven 1\n" {
		t.Errorf("dlq redrive b: %+v", r)
	}
	if n := s.rdb.LLen(context.Background(), keys.Queue(tn)).Val(); n != 1 {
		t.Errorf("queue holds %d jobs after the redrive, want 1", n)
	}
	if r := run(t, s.url, "", env, "dlq", "delete", tn, "a"); r.code != 0 || r.stdout != "deleted 1\n" {
		t.Errorf("dlq delete a: %+v", r)
	}
	if r := run(t, s.url, "", env, "dlq", "delete", tn, "a"); r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Errorf("dlq delete a again: %+v, want a 404", r)
	}
	if r := run(t, s.url, "", env, "dlq", "delete", tn, "--all"); r.code != 0 || r.stdout != "deleted 1\n" {
		t.Errorf("dlq delete --all: %+v, want c deleted", r)
	}
	if r := run(t, s.url, "", env, "dlq", "redrive", tn, "--all"); r.code != 0 || r.stdout != "redriven 0\n" {
		t.Errorf("dlq redrive --all of none: %+v", r)
	}
	for _, args := range [][]string{{"dlq"}, {"dlq", "nope"}, {"dlq", "redrive", tn}, {"dlq", "delete", tn, "x", "--all"}, {"dlq", "show", tn}} {
		if r := run(t, s.url, "", env, args...); r.code != 2 {
			t.Errorf("%q: %+v, want usage (2)", args, r)
		}
	}
}
