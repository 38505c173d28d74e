package sluicectl

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/config"
)

func TestPatchFromFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    map[string]any
		summary string
		wantErr bool
	}{
		{
			name: "outflow and admission",
			args: []string{"--rate", "20", "--capacity", "20.5", "--limit", "30", "--period", "60s", "--adaptive"},
			want: map[string]any{
				"outflow":   map[string]any{"rate": 20.0, "capacity": 20.5, "adaptive": true},
				"admission": map[string]any{"limit": int64(30), "period": "1m0s"},
			},
			summary: "admission.limit=30, admission.period=1m0s, outflow.adaptive=true, outflow.capacity=20.5, outflow.rate=20",
		},
		{
			name: "flags over --patch",
			args: []string{"--patch", `{"outflow":{"rate":1,"concurrency":2},"job_types":{"encode":null}}`, "--rate", "3", "--adaptive=false"},
			want: map[string]any{
				"outflow":   map[string]any{"rate": 3.0, "concurrency": 2.0, "adaptive": false},
				"job_types": map[string]any{"encode": nil},
			},
			summary: "outflow.adaptive=false, outflow.rate=3, --patch",
		},
		{
			name: "lists and strings",
			args: []string{"--api-keys", "sha256:aa, sha256:bb", "--target-url", "http://x/hook", "--on-limiter-error", "deny"},
			want: map[string]any{
				"api_keys":         []string{"sha256:aa", "sha256:bb"},
				"target":           map[string]any{"url": "http://x/hook"},
				"on_limiter_error": "deny",
			},
			summary: `api_keys=["sha256:aa","sha256:bb"], on_limiter_error=deny, target.url=http://x/hook`,
		},
		{name: "bad number", args: []string{"--rate", "fast"}, wantErr: true},
		{name: "bad duration", args: []string{"--period", "1 minute"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			p := newPatch(fs)
			err := fs.Parse(tc.args)
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error, want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.body(&cmd{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("patch (-want +got):\n%s", diff)
			}
			if s := p.summary(); s != tc.summary {
				t.Errorf("summary = %q, want %q", s, tc.summary)
			}
		})
	}
}

func TestChangesText(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name string
		e    client.AuditEntry
		want string
	}{
		{"changed", client.AuditEntry{Changes: []client.AuditChange{{Path: "outflow.rate", Old: str("5"), New: str("20")}}, ChangesTotal: 1},
			"outflow.rate: 5 → 20"},
		{"set and removed", client.AuditEntry{Changes: []client.AuditChange{
			{Path: "api_keys", New: str(`["sha256:aa"]`)}, {Path: "outflow.concurrency", Old: str("2")},
			{Path: "target.url", Old: str(`"http://a"`), New: str(`"http://b"`)}}, ChangesTotal: 3},
			`+api_keys=["sha256:aa"], -outflow.concurrency, target.url: http://a → http://b`},
		{"cut value and left-out changes", client.AuditEntry{Changes: []client.AuditChange{
			{Path: "target.url", New: str(`"http://aaaa`), Truncated: true}}, ChangesTotal: 4, Truncated: true},
			"+target.url=http://aaaa…, … 3 more"},
		{"no change", client.AuditEntry{Changes: []client.AuditChange{}}, "no change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := changesText(tc.e); got != tc.want {
				t.Errorf("changesText = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParseMixesFlagsAndArguments checks flags before and after positional
// arguments, the global flags after the command, and "--".
func TestParseMixesFlagsAndArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		rate string
		url  string
	}{
		{[]string{"acme", "--rate", "5"}, []string{"acme"}, "5", DefaultURL},
		{[]string{"--rate", "5", "acme"}, []string{"acme"}, "5", DefaultURL},
		{[]string{"acme", "--url", "http://h:1/"}, []string{"acme"}, "", "http://h:1"},
		{[]string{"--", "-odd", "--rate"}, []string{"-odd", "--rate"}, "", DefaultURL},
	} {
		c := &cmd{env: Env{Stderr: io.Discard, Getenv: func(string) string { return "" }}, name: "x"}
		fs := c.flags("", "")
		rate := fs.String("rate", "", "")
		pos, err := c.parse(fs, tc.args, 0, -1)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if !cmp.Equal(pos, tc.pos) || *rate != tc.rate || c.g.url != tc.url {
			t.Errorf("%q: pos %q rate %q url %q; want %q %q %q", tc.args, pos, *rate, c.g.url, tc.pos, tc.rate, tc.url)
		}
	}
}

func TestAdmissionAndOutflowText(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{admissionText(client.Admission{Algorithm: "gcra", Limit: 20, Period: client.Duration(1e9), Burst: 10}), "gcra 20/1s burst 10"},
		{admissionText(client.Admission{Algorithm: "sliding_window", Limit: 300, Period: client.Duration(60e9)}), "sliding_window 300/1m"},
		{admissionText(client.Admission{}), "-"},
		{outflowText(client.Outflow{Rate: 2.5, Capacity: 5, Concurrency: 4}), "2.5/s cap 5 conc 4"},
		{outflowText(client.Outflow{Unlimited: true}), "unlimited"},
		{outflowText(client.Outflow{Unlimited: true, Concurrency: 2}), "unlimited conc 2"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestPatchFlagRefusesNonFinite: a non-finite --rate, --capacity or
// --min-rate is refused by sluicectl itself (JSON has no NaN or Inf),
// naming the flag with the hint the server gives for a rate of 0; nothing
// is sent (the URL is unreachable, so a request would fail differently).
func TestPatchFlagRefusesNonFinite(t *testing.T) {
	for _, flagName := range []string{"rate", "capacity", "min-rate"} {
		for _, v := range []string{"NaN", "nan", "Inf", "-Inf", "+inf", "1e400"} {
			r := run(t, "http://127.0.0.1:1", "", nil, "tenants", "set", "x", "--"+flagName, v)
			want := "--" + flagName + " must be a finite number (got " + v + "); " + config.StopHint
			if r.code != exitUsage || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "encode patch") {
				t.Errorf("tenants set x --%s %s: exit %d, stderr %q; want exit %d and a message containing %q", flagName, v, r.code, r.stderr, exitUsage, want)
			}
		}
	}
}
