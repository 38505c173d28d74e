package sluicectl

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestJobsListAndPurge: "jobs list" pages a tenant's queued jobs (with a
// tenant key, or an admin token and --tenant; --all follows the pages) and
// "purge" cancels them, after which the list is empty and each reads
// cancelled with last error "purged".
func TestJobsListAndPurge(t *testing.T) {
	a := testenv.Name(t, "jl")
	st := startAdminStack(t, tenantYAML(a, "    outflow: {rate: 2}\n    target: {url: \"http://127.0.0.1:9/hook\"}\n"))
	key := map[string]string{"SLUICE_KEY": keyOf(a)}
	admin := map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}
	if r := run(t, st.url, "", key, "submit", "--type", "email", "--count", "3", "--id", "j"); r.code != 0 {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	r := run(t, st.url, "", key, "jobs", "list", "--state", "queued", "--limit", "2")
	for _, want := range []string{`JOB\s+TYPE\s+STATE\s+POSITION\s+ETA`, `j-1\s+email\s+queued\s+0\s+0s`, `j-2\s+email\s+queued\s+1\s+1s`} {
		if !regexp.MustCompile(`(?m)^` + want).MatchString(r.stdout) {
			t.Errorf("jobs list: no line %s in:\n%s", want, r.stdout)
		}
	}
	if r.code != 0 || strings.Contains(r.stdout, "j-3") || !strings.Contains(r.stderr, "--cursor ") {
		t.Errorf("jobs list --limit 2: exit %d, stdout %q, stderr %q; want 2 jobs and the next page's command", r.code, r.stdout, r.stderr)
	}
	r = run(t, st.url, "", admin, "jobs", "list", "--state", "queued", "--tenant", a, "--limit", "1", "--all", "--json")
	var page client.JobPage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Jobs) != 3 || page.Jobs[2].JobID != "j-3" {
		t.Errorf("jobs list --all --json: %v %s", err, r.stdout)
	}
	if r := run(t, st.url, "", key, "jobs", "list"); r.code != 2 || !strings.Contains(r.stderr, "--state is required") {
		t.Errorf("jobs list without --state: exit %d %q", r.code, r.stderr)
	}
	if r := run(t, st.url, "", key, "purge", a); r.code != 2 {
		t.Errorf("purge with a tenant key: exit %d %q, want 2 (needs an admin token)", r.code, r.stderr)
	}
	if r := run(t, st.url, "", admin, "purge", a); r.code != 0 || !strings.Contains(r.stdout, "purged 3 jobs of tenant "+a) {
		t.Errorf("purge: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := run(t, st.url, "", key, "jobs", "list", "--state", "queued"); !strings.Contains(r.stdout, "no queued jobs of tenant "+a) {
		t.Errorf("jobs list after the purge: %q", r.stdout)
	}
	if r := run(t, st.url, "", key, "job", "j-2"); !regexp.MustCompile(`(?m)^state\s+cancelled`).MatchString(r.stdout) ||
		!regexp.MustCompile(`(?m)^last error\s+purged`).MatchString(r.stdout) {
		t.Errorf("job after the purge:\n%s", r.stdout)
	}
}
