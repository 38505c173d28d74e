package sluicectl

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

var acceptedLine = regexp.MustCompile(`^[0-9a-f]{32} \d{4}-\d\d-\d\dT`)

// queuedIDs returns the ids and payloads of the jobs on tenant's Redis list,
// oldest first.
func queuedIDs(t *testing.T, st *stack, tenant string) (ids, payloads []string) {
	t.Helper()
	vals, err := st.rdb.LRange(context.Background(), keys.Queue(tenant), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		e, err := queue.Decode([]byte(v))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
		payloads = append(payloads, string(e.Payload))
	}
	return ids, payloads
}

func TestSubmitOneJob(t *testing.T) {
	tenant := testenv.Name(t, "ctl")
	st := startStack(t, "", tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 10, period: 1s, burst: 10}\n"))
	dir := t.TempDir()
	file := filepath.Join(dir, "p.json")
	if err := os.WriteFile(file, []byte(`{"to":"a@example.com"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := run(t, st.url, "", map[string]string{"SLUICE_KEY": keyOf(tenant)},
		"submit", "--type", "email", "--payload", "@"+file, "--id", "order-1")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "order-1 ") {
		t.Errorf("stdout = %q, want the job id order-1 and its enqueued_at", r.stdout)
	}
	ids, payloads := queuedIDs(t, st, tenant)
	if diff := cmp.Diff([]string{"order-1"}, ids); diff != "" {
		t.Errorf("queued ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`{"to":"a@example.com"}`}, payloads); diff != "" {
		t.Errorf("queued payloads (-want +got):\n%s", diff)
	}
}

// TestSubmitCountShowsThrottling submits 4 jobs against a GCRA that admits
// 2 at once and one a minute: two 202s, then two 429s printed with the
// server's detail, the summary, and exit code 1.
func TestSubmitCountShowsThrottling(t *testing.T) {
	tenant := testenv.Name(t, "ctl")
	st := startStack(t, "", tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 1, period: 1m, burst: 2}\n"))
	r := run(t, st.url, "", nil, "submit", "--key", keyOf(tenant), "--type", "email", "--count", "4", "--id", "n", "--tries", "1")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; stderr %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "n-1 ") || !strings.HasPrefix(lines[1], "n-2 ") {
		t.Errorf("stdout = %q, want the lines of n-1 and n-2", r.stdout)
	}
	if got := strings.Count(r.stderr, "refused: 429 Quota exceeded: tenant "+tenant+" exceeded policy tenant"); got != 2 {
		t.Errorf("stderr has %d 429 lines, want 2:\n%s", got, r.stderr)
	}
	for _, want := range []string{"(retry after ", "2 accepted, 2 refused", "2 of 4 jobs refused"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	ids, _ := queuedIDs(t, st, tenant)
	if diff := cmp.Diff([]string{"n-1", "n-2"}, ids); diff != "" {
		t.Errorf("queued ids (-want +got):\n%s", diff)
	}
}

func TestSubmitBatch(t *testing.T) {
	tenant := testenv.Name(t, "ctl")
	st := startStack(t, "", tenantYAML(tenant, "    admission: {algorithm: fixed_window, limit: 100, period: 1m}\n"))
	r := run(t, st.url, `{"n":1}`, map[string]string{"SLUICE_KEY": keyOf(tenant)},
		"submit", "--type", "report", "--count", "3", "--batch", "--payload", "@-")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, l := range lines {
		if !acceptedLine.MatchString(l) {
			t.Errorf("line %q is not '<job_id> <enqueued_at>'", l)
		}
	}
	ids, payloads := queuedIDs(t, st, tenant)
	if len(lines) != 3 || len(ids) != 3 {
		t.Fatalf("printed %d jobs, queued %d; want 3 and 3", len(lines), len(ids))
	}
	if diff := cmp.Diff([]string{`{"n":1}`, `{"n":1}`, `{"n":1}`}, payloads); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
}

// TestSubmitErrors checks that each mistake is reported with the server's
// problem (status, detail, field) or as bad usage, with the exit code.
func TestSubmitErrors(t *testing.T) {
	tenant := testenv.Name(t, "ctl")
	st := startStack(t, "", tenantYAML(tenant, "    admission: {algorithm: gcra, limit: 10, period: 1s, burst: 3}\n"))
	key := map[string]string{"SLUICE_KEY": keyOf(tenant)}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stderr string
	}{
		{"bad type", key, []string{"submit", "--type", "no spaces"}, 1,
			`sluicectl submit: 422 Unprocessable Entity: type must be 1 to 128 characters of [A-Za-z0-9._:-], not "." or ".." (got "no spaces") [field type]`},
		{"over capacity", key, []string{"submit", "--type", "email", "--cost", "4"}, 1,
			`[field cost]`},
		{"unknown key", map[string]string{"SLUICE_KEY": "nope"}, []string{"submit", "--type", "email"}, 1,
			`sluicectl submit: 401 Unauthorized: unknown API key [field Authorization]`},
		{"no key", nil, []string{"submit", "--type", "email"}, 2,
			`needs a tenant key: --key or SLUICE_KEY`},
		{"no type", key, []string{"submit"}, 2, `--type is required`},
		{"bad payload", key, []string{"submit", "--type", "x", "--payload", "{"}, 2, `--payload is not valid JSON`},
		{"stray argument", key, []string{"submit", "--type", "x", "extra"}, 2, `too many arguments: ["extra"]`},
		{"unknown command", key, []string{"sumbit"}, 2, `unknown command "sumbit"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, st.url, "", tc.env, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and stderr containing %q", r.code, r.stderr, tc.code, tc.stderr)
			}
		})
	}
}

func TestHashKey(t *testing.T) {
	want := "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n"
	if r := run(t, "", "", nil, "hash-key", "hello"); r.code != 0 || r.stdout != want {
		t.Errorf("hash-key hello = %d %q, want 0 %q", r.code, r.stdout, want)
	}
	if r := run(t, "", "hello\n", nil, "hash-key", "-"); r.code != 0 || r.stdout != want {
		t.Errorf("hash-key - = %d %q, want 0 %q", r.code, r.stdout, want)
	}
}
