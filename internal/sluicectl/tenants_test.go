package sluicectl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestTenantsLifecycle drives the real admin API through sluicectl: list,
// create from a file, change keys with flags (a merge patch), read back,
// see the audit log, delete, and the errors on the way.
func TestTenantsLifecycle(t *testing.T) {
	base := testenv.Name(t, "base")
	st := startAdminStack(t, tenantYAML(base, "    admission: {algorithm: gcra, limit: 20, period: 1s, burst: 10}\n"+
		"    outflow: {rate: 5, capacity: 5, max_backlog: 1000}\n    target: {url: \"http://127.0.0.1:9/hook\"}\n"))
	admin := map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}
	n := testenv.Name(t, "new")

	r := run(t, st.url, "", admin, "tenants", "list")
	if r.code != 0 {
		t.Fatalf("list: exit %d: %s", r.code, r.stderr)
	}
	row := regexp.MustCompile(`(?m)^` + base + `\s+config\s+gcra 20/1s burst 10\s+5/s cap 5\s+1000\s+http://127.0.0.1:9/hook$`)
	if !strings.HasPrefix(r.stdout, "TENANT  ") || !row.MatchString(r.stdout) {
		t.Errorf("list:\n%s\nwant a header and the row %s", r.stdout, row)
	}

	file := filepath.Join(t.TempDir(), "spec.json")
	spec := `{"api_keys":["` + config.HashKey("k-"+n) + `"],"admission":{"algorithm":"sliding_window","limit":300,"period":"1m"},
		"outflow":{"rate":2,"max_backlog":200},"target":{"url":"http://127.0.0.1:9/hook"}}`
	if err := os.WriteFile(file, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		args   []string
		code   int
		stdout string // whole stdout, or "" not to compare
		stderr string // a substring, or "" for none
	}{
		{"create", []string{"tenants", "set", n, "--file", file}, 0, "created tenant " + n + " (version 1)\n", ""},
		// The same spec again changes nothing: no version, no audit entry.
		{"replace", []string{"tenants", "set", n, "--file", file}, 0, "replaced tenant " + n + " (version 1)\n", ""},
		{"patch", []string{"tenants", "set", n, "--rate", "20", "--capacity", "20"}, 0,
			"updated tenant " + n + " (version 2): outflow.capacity=20, outflow.rate=20\n", ""},
		{"invalid", []string{"tenants", "set", n, "--rate", "-1"}, 1, "",
			"sluicectl tenants: 422 Unprocessable Entity: tenants." + n + ".outflow.rate: must be > 0 units per second (got -1); " + config.StopHint + " [field outflow.rate]"},
		{"unknown key in file", []string{"tenants", "set", n, "--file", writeFile(t, `{"outflw":{}}`)}, 1, "",
			`json: unknown field "outflw"`},
		{"nothing to set", []string{"tenants", "set", n}, 2, "", "nothing to set"},
		{"tenant key is no admin token", []string{"tenants", "list", "--admin-token", keyOf(base)}, 1, "",
			"401 Unauthorized: missing, repeated or unknown admin token"},
		{"unknown tenant", []string{"tenants", "get", n + "-x"}, 1, "", "404 Not Found"},
	}
	for _, s := range steps {
		r := run(t, st.url, "", admin, s.args...)
		if r.code != s.code || (s.stdout != "" && r.stdout != s.stdout) || (s.stderr != "" && !strings.Contains(r.stderr, s.stderr)) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
				s.name, r.code, r.stdout, r.stderr, s.code, s.stdout, s.stderr)
		}
	}

	r = run(t, st.url, "", admin, "tenants", "get", n)
	var got client.Tenant
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
		t.Fatalf("get: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
	}
	if got.ID != n || got.Source != "runtime" || got.Version != 2 || got.Spec.Outflow.Rate != 20 ||
		got.Spec.Outflow.Capacity != 20 || got.Spec.Outflow.MaxBacklog != 200 || got.Spec.Admission.Limit != 300 {
		t.Errorf("get: %+v; want runtime version 2 with outflow rate 20, capacity 20, max_backlog 200 and limit 300", got)
	}

	r = run(t, st.url, "", admin, "tenants", "audit", n)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	want := []string{
		// min_rate was rate 2's default: it follows the new rate.
		`^\S+Z  ops  update  outflow\.capacity: 2 → 20, outflow\.min_rate: 0\.2 → 2, outflow\.rate: 2 → 20$`,
		`^\S+Z  ops  create  \+admission\.algorithm=sliding_window, .*\+outflow\.rate=2, .*\+target\.url=http://127\.0\.0\.1:9/hook`,
	}
	if r.code != 0 || len(lines) != len(want) {
		t.Fatalf("audit: exit %d, %d lines, want %d:\n%s%s", r.code, len(lines), len(want), r.stdout, r.stderr)
	}
	for i, w := range want {
		if !regexp.MustCompile(w).MatchString(lines[i]) {
			t.Errorf("audit line %d = %q, want it to match %s", i, lines[i], w)
		}
	}

	r = run(t, st.url, "", admin, "tenants", "delete", n)
	if r.code != 0 || r.stdout != "deleted tenant "+n+"\n" {
		t.Errorf("delete: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	r = run(t, st.url, "", admin, "tenants", "delete", n)
	if r.code != 1 || !strings.Contains(r.stderr, "404 Not Found") {
		t.Errorf("delete again: exit %d, stderr %q; want 1 and a 404", r.code, r.stderr)
	}
	r = run(t, st.url, "", admin, "tenants", "list", "--json")
	var list struct{ Tenants []client.Tenant }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("list --json: %v: %s", err, r.stdout)
	}
	var ids []string
	for _, tn := range list.Tenants {
		ids = append(ids, tn.ID)
	}
	if diff := cmp.Diff([]string{base}, ids); diff != "" {
		t.Errorf("tenants after delete (-want +got):\n%s", diff)
	}
}

func TestTenantsNeedAnAdminToken(t *testing.T) {
	r := run(t, "http://127.0.0.1:1", "", map[string]string{"SLUICE_KEY": "k"}, "tenants", "list")
	if r.code != 2 || !strings.Contains(r.stderr, "needs an admin token") {
		t.Errorf("exit %d, stderr %q; want 2 and a hint", r.code, r.stderr)
	}
}

// writeFile writes content to a temporary file and returns its name.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "f.json")
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestTenantsAuditPages pages through a tenant's audit: --limit prints one
// page and the cursor of the next on stderr, --cursor continues from it,
// --all follows every page, and a limit the server refuses is exit 1
// naming the field.
func TestTenantsAuditPages(t *testing.T) {
	base := testenv.Name(t, "base")
	st := startAdminStack(t, tenantYAML(base, "    outflow: {rate: 5}\n"))
	admin := map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}
	for rate := 6; rate <= 10; rate++ { // versions 1 to 5
		if r := run(t, st.url, "", admin, "tenants", "set", base, "--rate", strconv.Itoa(rate)); r.code != 0 {
			t.Fatalf("set: exit %d: %s", r.code, r.stderr)
		}
	}
	rates := func(out string) []string {
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if m := regexp.MustCompile(`outflow\.rate: \d+ → (\d+)`).FindStringSubmatch(l); m != nil {
				got = append(got, m[1])
			}
		}
		return got
	}
	r := run(t, st.url, "", admin, "tenants", "audit", base, "--limit", "2")
	if r.code != 0 || !cmp.Equal(rates(r.stdout), []string{"10", "9"}) ||
		!strings.Contains(r.stderr, "sluicectl tenants audit "+base+" --cursor 4 (or --all)") {
		t.Fatalf("--limit 2: exit %d, stdout %q, stderr %q; want rates 10 and 9 and the cursor 4", r.code, r.stdout, r.stderr)
	}
	r = run(t, st.url, "", admin, "tenants", "audit", base, "--limit", "2", "--cursor", "4")
	if r.code != 0 || !cmp.Equal(rates(r.stdout), []string{"8", "7"}) || !strings.Contains(r.stderr, "--cursor 2 ") {
		t.Errorf("--cursor 4: exit %d, stdout %q, stderr %q; want rates 8 and 7 and the cursor 2", r.code, r.stdout, r.stderr)
	}
	r = run(t, st.url, "", admin, "tenants", "audit", base, "--limit", "2", "--all")
	if r.code != 0 || !cmp.Equal(rates(r.stdout), []string{"10", "9", "8", "7", "6"}) || r.stderr != "" {
		t.Errorf("--all: exit %d, stdout %q, stderr %q; want every rate and no cursor", r.code, r.stdout, r.stderr)
	}
	r = run(t, st.url, "", admin, "tenants", "audit", base, "--all", "--json")
	var all struct{ Entries []client.AuditEntry }
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || len(all.Entries) != 5 || all.Entries[4].Version != 1 {
		t.Errorf("--all --json: %v, %d entries: %s", err, len(all.Entries), r.stdout)
	}
	r = run(t, st.url, "", admin, "tenants", "audit", base, "--limit", "500")
	if r.code != 1 || !strings.Contains(r.stderr, "[field limit]") {
		t.Errorf("--limit 500: exit %d, stderr %q; want 1 naming the field limit", r.code, r.stderr)
	}
	r = run(t, st.url, "", admin, "tenants", "audit", base, "--cursor", "x")
	if r.code != 1 || !strings.Contains(r.stderr, "[field cursor]") {
		t.Errorf("--cursor x: exit %d, stderr %q; want 1 naming the field cursor", r.code, r.stderr)
	}
}

// TestTenantsSetUnlimited: --rate 0 is the server's 422 naming outflow.rate
// and saying what to do instead, and changes nothing; --unlimited lifts the
// rate and --rate shapes the tenant again.
func TestTenantsSetUnlimited(t *testing.T) {
	n := testenv.Name(t, "unl")
	st := startAdminStack(t, tenantYAML(n, "    outflow: {rate: 2}\n    target: {url: \"http://127.0.0.1:9/hook\"}\n"))
	admin := map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}
	get := func() client.Tenant {
		t.Helper()
		r := run(t, st.url, "", admin, "tenants", "get", n)
		var got client.Tenant
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != 0 {
			t.Fatalf("get: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
		}
		return got
	}
	r := run(t, st.url, "", admin, "tenants", "set", n, "--rate", "0")
	want := "sluicectl tenants: 422 Unprocessable Entity: tenants." + n + ".outflow.rate: must be > 0 units per second (got 0); " + config.StopHint + " [field outflow.rate]"
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("--rate 0: exit %d, stderr %q; want exit 1 and %q", r.code, r.stderr, want)
	}
	if got := get(); got.Source != "config" || got.Spec.Outflow.Rate != 2 || got.Spec.Outflow.Unlimited {
		t.Errorf("after --rate 0: %+v, want the file's rate 2 unchanged", got)
	}
	r = run(t, st.url, "", admin, "tenants", "set", n, "--unlimited")
	if r.code != 0 || r.stdout != "updated tenant "+n+" (version 1): outflow.unlimited=true\n" {
		t.Errorf("--unlimited: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := get().Spec.Outflow; !got.Unlimited || got.Rate != 0 {
		t.Errorf("after --unlimited: outflow %+v, want unlimited without a rate", got)
	}
	if r := run(t, st.url, "", admin, "tenants", "list"); !regexp.MustCompile(`(?m)^` + n + `\s+runtime\s+-\s+unlimited\b`).MatchString(r.stdout) {
		t.Errorf("list:\n%s\nwant %s unlimited", r.stdout, n)
	}
	r = run(t, st.url, "", admin, "tenants", "set", n, "--rate", "3")
	if r.code != 0 {
		t.Errorf("--rate 3: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := get().Spec.Outflow; got.Unlimited || got.Rate != 3 || got.Capacity != 3 {
		t.Errorf("after --rate 3: outflow %+v, want rate 3 (capacity 3), not unlimited", got)
	}
}
