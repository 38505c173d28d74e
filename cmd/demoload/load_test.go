package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/redisq"
)

func TestParseStreams(t *testing.T) {
	got, err := parseStreams("acme:k1:30:email, globex:k2:0.5")
	if err != nil {
		t.Fatal(err)
	}
	want := []stream{{"acme", "k1", 30, "email"}, {"globex", "k2", 0.5, "demo"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("streams (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "acme", "acme:k1", "acme:k1:fast", "acme:k1:0", ":k:1", "a:k:1:t:x"} {
		if _, err := parseStreams(bad); err == nil {
			t.Errorf("parseStreams(%q): no error", bad)
		}
	}
	if _, err := parseStreams(defaultLoad); err != nil {
		t.Errorf("default load: %v", err)
	}
}

// TestLoadCountsThrottling offers 40 jobs/s for 1.5 s to a real ingest whose
// tenant admits 10/s with a burst of 5 (GCRA on the shared Redis): about
// 5 + 10 × 1.5 = 20 are accepted and the rest are counted as 429s.
func TestLoadCountsThrottling(t *testing.T) {
	tenant := testenv.Name(t, "load")
	y := fmt.Sprintf("tenants:\n  %s:\n    api_keys: [%q]\n    admission: {algorithm: gcra, limit: 10, period: 1s, burst: 5}\n",
		tenant, config.HashKey("k-"+tenant))
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rdb := testenv.Redis(t)
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	adm, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ingest.New(ingest.Config{Settings: cfg, Redis: rdb, Producer: p, Admitter: adm})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	var out, errs bytes.Buffer
	const window = 1500 * time.Millisecond
	totals := runLoad(ctx, loadConfig{
		URL: hs.URL, Streams: []stream{{Name: "t", Key: "k-" + tenant, Rate: 40, Type: "email"}},
		Duration: window, Tries: 1, MaxInFlight: 16, Report: 500 * time.Millisecond, Out: &out, Errors: &errs,
	})
	got := totals["t"]
	t.Logf("totals %+v\n%s", got, out.String())
	// Tolerances: the ticker may lose a tick or two on a busy machine, and
	// the GCRA admits burst + rate × elapsed, elapsed between 1 s (first and
	// last job) and the 1.5 s window.
	if got.accepted < 5+10 || got.accepted > 5+15+2 {
		t.Errorf("accepted = %d, want within [15, 22]", got.accepted)
	}
	if got.throttled < 20 {
		t.Errorf("throttled = %d, want at least 20 of the ~60 offered", got.throttled)
	}
	if got.failed != 0 || got.skipped != 0 || errs.Len() != 0 {
		t.Errorf("failed %d, skipped %d, errors %q; want none", got.failed, got.skipped, errs.String())
	}
	if lines := strings.Count(out.String(), "t ok="); lines < 2 {
		t.Errorf("%d report lines, want at least 2 in 1.5 s at one per 0.5 s", lines)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("total t: accepted=%d throttled=%d failed=0 skipped=0", got.accepted, got.throttled)) {
		t.Errorf("no total line in:\n%s", out.String())
	}
}
