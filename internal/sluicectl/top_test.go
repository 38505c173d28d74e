package sluicectl

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/client"
)

func f64(v float64) *float64 { return &v }

// TestRenderFixedFrame compares a whole frame of top with the text a user
// sees: a throttled tenant with a backlog and admission rates, one whose
// outflow backed off, an unlimited one, a paused one, and one whose stats
// failed.
func TestRenderFixedFrame(t *testing.T) {
	f := frame{
		URL:      "http://127.0.0.1:8080",
		At:       time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
		Interval: time.Second,
		Rows: []row{
			{Tenant: "acme", Stats: client.Stats{Tenant: "acme", Backlog: 120, WaterLevel: 2.5, InFlight: 1, ETASeconds: f64(24),
				Outflow:   client.OutflowStats{ConfiguredRate: 5, EffectiveRate: 5, MeasuredRate: 4.94, Capacity: 5},
				Admission: client.AdmissionStats{AdmittedRate: 5.2, RefusedRate: 0.7}}},
			{Tenant: "globex", Stats: client.Stats{Tenant: "globex", Backlog: 200, WaterLevel: 2, DLQ: 3, ETASeconds: f64(200.2),
				Outflow: client.OutflowStats{ConfiguredRate: 2, EffectiveRate: 1, MeasuredRate: 1, Capacity: 2}}},
			{Tenant: "initech-long-name", Stats: client.Stats{Tenant: "initech-long-name", Backlog: 0,
				Outflow: client.OutflowStats{Unlimited: true}}},
			{Tenant: "hooli", Stats: client.Stats{Tenant: "hooli", Backlog: 40, ETASeconds: f64(4), Paused: true,
				Outflow:   client.OutflowStats{ConfiguredRate: 10, EffectiveRate: 10, Capacity: 10},
				Admission: client.AdmissionStats{AdmittedRate: 3}}},
			{Tenant: "gone", Err: &client.Error{Status: 404, Title: "Not Found", Detail: "no tenant gone"}},
		},
	}
	want := strings.Join([]string{
		"sluice top · http://127.0.0.1:8080 · 2030-01-02 03:04:05 · every 1s · q quits",
		"",
		"TENANT             BACKLOG   ADM/s   REF/s  CONF/s   EFF/s  MEAS/s  WATER/CAP                IN-FLIGHT   DLQ      ETA  NOTE",
		"acme                   120     5.2     0.7     5.0     5.0     4.9  2.5/5       [#####.....]         1     0      24s",
		"globex                 200     0.0     0.0     2.0     1.0     1.0  2.0/2       [##########]         0     3    3m21s  backing off (downstream 429/503)",
		"initech-long-name        0     0.0     0.0     0.0     0.0     0.0  0.0/0       [..........]         0     0        -  no outflow limit",
		"hooli                   40     3.0     0.0    10.0    10.0     0.0  0.0/10      [..........]         0     0       4s  PAUSED (resume: sluicectl resume hooli)",
		"gone              error: 404 Not Found: no tenant gone",
		"",
		"5 tenants · backlog 360 · delivering 5.9/s · 1 paused · 1 not answered",
		"",
	}, "\n")
	if diff := cmp.Diff(want, render(f)); diff != "" {
		t.Errorf("frame (-want +got):\n%s", diff)
	}
}

func TestRenderEmptyAndFailed(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	head := "sluice top · u · 2030-01-02 03:04:05 · every 2s · q quits\n\n"
	for _, tc := range []struct {
		f    frame
		want string
	}{
		{frame{URL: "u", At: at, Interval: 2 * time.Second}, head + "no tenants\n"},
		{frame{URL: "u", At: at, Interval: 2 * time.Second, Err: &client.Error{Status: 401, Title: "Unauthorized", Detail: "unknown admin token"}},
			head + "cannot list tenants: 401 Unauthorized: unknown admin token\n"},
		{frame{URL: "u", At: at, Interval: 2 * time.Second, Err: errors.New("dial tcp: connection refused")},
			head + "cannot list tenants: dial tcp: connection refused\n"},
	} {
		if diff := cmp.Diff(tc.want, render(tc.f)); diff != "" {
			t.Errorf("frame (-want +got):\n%s", diff)
		}
	}
}

func TestETAAndBar(t *testing.T) {
	for _, tc := range []struct {
		sec  *float64
		want string
	}{
		{nil, "-"}, {f64(0), "0s"}, {f64(0.2), "1s"}, {f64(59), "59s"}, {f64(60), "1m00s"},
		{f64(3599), "59m59s"}, {f64(3600), "1h00m"}, {f64(7830), "2h10m"}, {f64(-1), "-"},
	} {
		if got := eta(tc.sec); got != tc.want {
			t.Errorf("eta(%v) = %q, want %q", tc.sec, got, tc.want)
		}
	}
	for _, tc := range []struct {
		level, capacity float64
		want            string
	}{
		{0, 5, "[.....]"}, {2.5, 5, "[###..]"}, {5, 5, "[#####]"}, {7, 5, "[#####]"}, {1, 0, "[.....]"},
	} {
		if got := bar(tc.level, tc.capacity, 5); got != tc.want {
			t.Errorf("bar(%v, %v) = %q, want %q", tc.level, tc.capacity, got, tc.want)
		}
	}
}

func TestTTYFrame(t *testing.T) {
	got := ttyFrame("a\nb\n")
	want := "\x1b[Ha\x1b[K\r\nb\x1b[K\r\n\x1b[J"
	if got != want {
		t.Errorf("ttyFrame = %q, want %q", got, want)
	}
}

func TestWatchKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		quit bool
	}{{"xyq", true}, {"Q", true}, {"\x03", true}, {"abc", false}, {"", false}} {
		quit := make(chan struct{})
		watchKeys(strings.NewReader(tc.in), quit)
		select {
		case <-quit:
			if !tc.quit {
				t.Errorf("%q: quit, want not", tc.in)
			}
		default:
			if tc.quit {
				t.Errorf("%q: no quit, want quit", tc.in)
			}
		}
	}
}

func TestTopNeedsAdminTokenToListTenants(t *testing.T) {
	r := run(t, "http://127.0.0.1:1", "", map[string]string{"SLUICE_KEY": "k"}, "top")
	if r.code != 2 || !strings.Contains(r.stderr, "needs an admin token") {
		t.Errorf("exit %d, stderr %q; want 2 and a hint", r.code, r.stderr)
	}
}
