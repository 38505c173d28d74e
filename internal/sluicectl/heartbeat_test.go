package sluicectl

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestSubmitScheduledAndHeartbeat: submit --delay answers with the due
// time and the job is scheduled (not queued); job ID shows it;
// submit --heartbeat makes a heartbeat job that jobs heartbeat ID polls;
// --delay with --not-before is a usage error, and jobs heartbeat of an
// ordinary job fails with the server's 409.
func TestSubmitScheduledAndHeartbeat(t *testing.T) {
	tenant := testenv.Name(t, "ctlsched")
	st := startStack(t, "", tenantYAML(tenant, ""))
	t.Cleanup(func() { st.rdb.ZRem(context.Background(), keys.ScheduledTenants(), tenant) })
	env := map[string]string{"SLUICE_KEY": keyOf(tenant)}
	r := run(t, st.url, "", env, "submit", "--type", "email", "--id", "later", "--delay", "1h")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "later ") || !strings.Contains(r.stdout, " due ") {
		t.Fatalf("submit --delay: exit %d, stdout %q, stderr %s; want the id and a due time", r.code, r.stdout, r.stderr)
	}
	if ids, _ := queuedIDs(t, st, tenant); len(ids) != 0 {
		t.Errorf("a scheduled job was queued: %v", ids)
	}
	if r := run(t, st.url, "", env, "job", "later"); r.code != 0 || !strings.Contains(r.stdout, "scheduled") || !strings.Contains(r.stdout, "due") {
		t.Errorf("job later: exit %d, stdout %q; want state scheduled and its due time", r.code, r.stdout)
	}
	if r := run(t, st.url, "", env, "submit", "--type", "email", "--delay", "1h", "--not-before", "2030-01-02T00:00:00Z"); r.code != 2 {
		t.Errorf("--delay with --not-before: exit %d, want 2 (usage)", r.code)
	}
	if r := run(t, st.url, "", env, "submit", "--type", "email", "--id", "beat", "--heartbeat", "30s"); r.code != 0 {
		t.Fatalf("submit --heartbeat: exit %d, stderr %s", r.code, r.stderr)
	}
	if r := run(t, st.url, "", env, "jobs", "heartbeat", "beat"); r.code != 0 || !strings.HasPrefix(r.stdout, "beat queued expires ") {
		t.Errorf("jobs heartbeat beat: exit %d, stdout %q, stderr %s; want \"beat queued expires ...\"", r.code, r.stdout, r.stderr)
	}
	if r := run(t, st.url, "", env, "submit", "--type", "email", "--id", "plain"); r.code != 0 {
		t.Fatalf("submit: exit %d, stderr %s", r.code, r.stderr)
	}
	if r := run(t, st.url, "", env, "jobs", "heartbeat", "plain"); r.code != 1 || !strings.Contains(r.stderr, "not a heartbeat job") {
		t.Errorf("jobs heartbeat plain: exit %d, stderr %q; want 1 and the server's 409", r.code, r.stderr)
	}
}
