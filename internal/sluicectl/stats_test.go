package sluicectl

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestStatsJobCancelTop queues three jobs of a tenant whose outflow is
// 2/s (no drainer runs, so they stay queued) and reads them back through
// the real visibility API: stats, a job's position and ETA, cancel, and
// plain top frames.
func TestStatsJobCancelTop(t *testing.T) {
	a, b := testenv.Name(t, "sa"), testenv.Name(t, "sb")
	st := startAdminStack(t,
		tenantYAML(a, "    admission: {algorithm: gcra, limit: 10, period: 1s, burst: 10}\n    outflow: {rate: 2, max_backlog: 100}\n"+
			"    target: {url: \"http://127.0.0.1:9/hook\"}\n"),
		tenantYAML(b, "    target: {url: \"http://127.0.0.1:9/hook\"}\n"))
	keyA := map[string]string{"SLUICE_KEY": keyOf(a)}
	admin := map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}
	if r := run(t, st.url, "", keyA, "submit", "--type", "email", "--count", "3", "--id", "j"); r.code != 0 {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}

	r := run(t, st.url, "", keyA, "stats", a)
	for _, want := range []string{
		"tenant       " + a + "\n",
		"backlog      3 (drains in 2s)\n",
		"outflow      configured 2.0/s, effective 2.0/s, measured 0.0/s (last 10 s)\n",
		"water level  0.0 of 2\n",
		"in flight    0\n",
		"dead (DLQ)   0\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stats: no line %q in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	r = run(t, st.url, "", admin, "stats", a, "--json")
	var stats client.Stats
	if err := json.Unmarshal([]byte(r.stdout), &stats); err != nil || stats.Backlog != 3 || stats.ETASeconds == nil || *stats.ETASeconds != 1.5 {
		t.Errorf("stats --json (admin): %v, %+v; want backlog 3, eta 1.5 s", err, stats)
	}
	if r := run(t, st.url, "", keyA, "stats", b); r.code != 1 || !strings.Contains(r.stderr, "404 Not Found: no tenant") {
		t.Errorf("another tenant's stats: exit %d, stderr %q; want 1 and a 404", r.code, r.stderr)
	}

	r = run(t, st.url, "", keyA, "job", "j-2")
	for _, want := range []string{`job\s+j-2`, `tenant\s+` + a, `type\s+email`, `state\s+queued`,
		`position\s+1 ahead`, `eta\s+1s`, `attempt\s+0`, `enqueued\s+\d{4}-\d\d-\d\dT`} {
		if !regexp.MustCompile(`(?m)^` + want).MatchString(r.stdout) {
			t.Errorf("job: no line %s in:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	r = run(t, st.url, "", admin, "job", "j-1", "--tenant", a, "--json")
	var js client.JobStatus
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || js.State != "queued" || js.Position == nil || *js.Position != 0 {
		t.Errorf("job --tenant (admin): %v, %+v; want queued at position 0", err, js)
	}
	if r := run(t, st.url, "", keyA, "cancel", "j-2"); r.code != 0 || r.stdout != "j-2 cancelled\n" {
		t.Errorf("cancel: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = run(t, st.url, "", keyA, "cancel", "j-2")
	if r.code != 1 || !strings.Contains(r.stderr, `409 Conflict: job "j-2" is cancelled`) {
		t.Errorf("cancel again: exit %d, stderr %q; want 1 and a 409", r.code, r.stderr)
	}
	if r := run(t, st.url, "", admin, "job", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, "404 Not Found") {
		t.Errorf("unknown job: exit %d, stderr %q; want 1 and a 404", r.code, r.stderr)
	}

	// top on a non-terminal prints plain frames: two of them, each with a
	// row per tenant (the admin token lists them all).
	r = run(t, st.url, "", admin, "top", "--frames", "2", "--interval", "100ms")
	if r.code != 0 || strings.Count(r.stdout, "sluice top · "+st.url) != 2 {
		t.Fatalf("top: exit %d, want 2 frames:\n%s%s", r.code, r.stdout, r.stderr)
	}
	// ADM/s and REF/s are 0.0: this handler is not served, so it adds no
	// admission counts (the admission rates are tested in pause_test.go).
	rowA := regexp.MustCompile(`(?m)^` + a + `\s+[23]\s+0\.0\s+0\.0\s+2\.0\s+2\.0\s+0\.0\s+0\.0/2\s+\[\.{10}\]\s+0\s+0\s+[12]s$`)
	rowB := regexp.MustCompile(`(?m)^` + b + `\s+0\s+0\.0\s+0\.0\s+0\.0\s+0\.0\s+0\.0\s+0\.0/0\s+\[\.{10}\]\s+0\s+0\s+-\s+no outflow limit$`)
	if len(rowA.FindAllString(r.stdout, -1)) != 2 || len(rowB.FindAllString(r.stdout, -1)) != 2 {
		t.Errorf("top: want 2 rows of each tenant matching\n%s\n%s\nin:\n%s", rowA, rowB, r.stdout)
	}
	// A tenant key names its tenant.
	r = run(t, st.url, "", keyA, "top", "--frames", "1", a, b)
	if r.code != 0 || !rowA.MatchString(r.stdout) || !strings.Contains(r.stdout, b+" error: 404 Not Found") {
		t.Errorf("top with a tenant key: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}
