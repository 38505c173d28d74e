package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/outflow"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// statsView is the JSON of GET /v1/tenants/{id}/stats.
type statsView struct {
	Tenant  string `json:"tenant"`
	Backlog int64  `json:"backlog"`
	Outflow struct {
		Unlimited      bool    `json:"unlimited"`
		ConfiguredRate float64 `json:"configured_rate"`
		EffectiveRate  float64 `json:"effective_rate"`
		MeasuredRate   float64 `json:"measured_rate"`
		Capacity       float64 `json:"capacity"`
	} `json:"outflow"`
	WaterLevel float64  `json:"water_level"`
	InFlight   int64    `json:"in_flight"`
	DLQ        int64    `json:"dlq"`
	ETASeconds *float64 `json:"eta_seconds"`
}

// stats GETs /v1/tenants/{tenant}/stats with key and decodes a 200.
func (h *harness) stats(t testing.TB, key, tenant string) statsView {
	t.Helper()
	a := h.request(t, http.MethodGet, "/v1/tenants/"+tenant+"/stats", key, "", "")
	if a.status != http.StatusOK {
		t.Fatalf("GET stats of %s = %d %s, want 200", tenant, a.status, a.body)
	}
	var v statsView
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// redisNow is Redis TIME.
func redisNow(t testing.TB, rdb redis.UniversalClient) time.Time {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// TestTenantStats checks every figure of the stats answer for a tenant
// with a known backlog (6 jobs) and outflow (4 jobs/s, capacity 2), each
// case adding one kind of drain-side state. ETAs are exact: backlog ÷
// effective rate.
func TestTenantStats(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	type want struct {
		configured, effective, measured, capacity float64
		unlimited                                 bool
		inFlight, dlq                             int64
		eta                                       *float64
		waterMin, waterMax                        float64
	}
	base := want{configured: 4, effective: 4, capacity: 2, eta: ptr(1.5)}
	with := func(f func(*want)) want { w := base; f(&w); return w }
	tests := []struct {
		name    string
		outflow string
		setup   func(t *testing.T, tenant string)
		want    want
	}{
		{"backlog and rate", "", nil, base},
		{"water level leaked to now", "", func(t *testing.T, tenant string) {
			if _, err := outflow.NewBucket(rdb).Take(ctx, tenant, outflow.Limit{Rate: 4, Capacity: 2}, 1); err != nil {
				t.Fatal(err)
			}
		}, with(func(w *want) { w.waterMin, w.waterMax = 0.9, 1 })}, // 1 unit, less 4/s × the ms since
		{"adaptive backoff lowers the effective rate", "", func(t *testing.T, tenant string) {
			rdb.HSet(ctx, keys.Water(tenant), "eff", 2, "eff_ts", redisNow(t, rdb).UnixMicro(), "eff_inc", 0)
		}, with(func(w *want) { w.effective, w.eta = 2, ptr(3.0) })},
		{"runtime override", "", func(t *testing.T, tenant string) {
			rdb.HSet(ctx, keys.Override(tenant), "outflow_rate", 8, "outflow_capacity", 3)
		}, with(func(w *want) { w.configured, w.effective, w.capacity, w.eta = 8, 8, 3, ptr(0.75) })},
		{"in flight and dead letters", "", func(t *testing.T, tenant string) {
			// The first is in flight (its lease ends in 30 s) and was started
			// outside the measured window, which a start in this very second
			// would enter as soon as the second ends; the second one's
			// deadline has passed.
			for i, at := range []time.Time{time.Now().Add(-30 * time.Second), time.Now().Add(-time.Hour)} {
				d := jobstate.Dispatch{Tenant: tenant, JobID: fmt.Sprint(i), Member: fmt.Sprintf("%d|x", i), Attempt: 1, Lease: time.Minute, Now: at}
				v, err := d.Call().Run(ctx, rdb).Result()
				if err == nil {
					_, err = jobstate.StartReply(v)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			rdb.ZAdd(ctx, keys.JobIndex(tenant, "dead"), redis.Z{Score: 1, Member: "a"}, redis.Z{Score: 2, Member: "b"})
		}, with(func(w *want) { w.inFlight, w.dlq = 1, 2 })},
		{"in flight by their leases (the Redis take)", "", func(t *testing.T, tenant string) {
			// Two live leases, one of them also in the deliveries set (a
			// start of the separate path), one lapsed: in flight is the
			// larger count, 2, not the sum.
			now := redisNow(t, rdb)
			rdb.ZAdd(ctx, keys.Processing(tenant), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "a|x"},
				redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "b|x"}, redis.Z{Score: 1, Member: "c|x"})
			rdb.ZAdd(ctx, keys.Delivering(tenant), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "a|x"})
		}, with(func(w *want) { w.inFlight = 2 })},
		{"measured outflow over the last 10 complete seconds", "", func(t *testing.T, tenant string) {
			// 5 units in every second from 12 s ago to 2 s ahead: any
			// window of 10 complete seconds while this test runs sums 50.
			now := redisNow(t, rdb).Unix()
			for s := now - 12; s <= now+2; s++ {
				rdb.HSet(ctx, keys.Outflow(tenant), fmt.Sprint(s), 5)
			}
		}, with(func(w *want) { w.measured = 5 })},
		// An unlimited outflow has no rate, no bucket and no ETA; an
		// override outflow_rate (0 or not) does not give it one.
		{"unlimited outflow", "    outflow: {unlimited: true}\n", func(t *testing.T, tenant string) {
			rdb.HSet(ctx, keys.Override(tenant), "outflow_rate", "0")
			rdb.PExpire(ctx, keys.Override(tenant), time.Minute)
		}, want{unlimited: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant := testenv.Name(t, "st")
			body := tt.outflow
			if body == "" {
				body = "    outflow: {rate: 4, capacity: 2}\n"
			}
			h := startIngest(t, visConfig(t, body, tenant), deps{rdb: rdb})
			for i := range 6 {
				if a := h.post(t, tenant, "/v1/jobs", fmt.Sprintf(`{"type":"mail","id":"j%d"}`, i)); a.status != http.StatusAccepted {
					t.Fatalf("submit = %d %s", a.status, a.body)
				}
			}
			if tt.setup != nil {
				tt.setup(t, tenant)
			}
			got := h.stats(t, apiKey(tenant), tenant)
			w := tt.want
			if got.WaterLevel < w.waterMin || got.WaterLevel > w.waterMax {
				t.Errorf("water_level = %v, want in [%v, %v]", got.WaterLevel, w.waterMin, w.waterMax)
			}
			wantView := statsView{Tenant: tenant, Backlog: 6, WaterLevel: got.WaterLevel, InFlight: w.inFlight, DLQ: w.dlq, ETASeconds: w.eta}
			wantView.Outflow.Unlimited = w.unlimited
			wantView.Outflow.ConfiguredRate, wantView.Outflow.EffectiveRate = w.configured, w.effective
			wantView.Outflow.MeasuredRate, wantView.Outflow.Capacity = w.measured, w.capacity
			if diff := cmp.Diff(wantView, got); diff != "" {
				t.Errorf("stats (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTenantStatsAccess(t *testing.T) {
	rdb := testenv.Redis(t)
	a, b := testenv.Name(t, "st"), testenv.Name(t, "st")
	h := startIngest(t, visConfig(t, "    outflow: {rate: 4}\n", a, b), deps{rdb: rdb})
	for _, tt := range []struct {
		name, method, tenant, key string
		status                    int
	}{
		{"own tenant", "GET", a, apiKey(a), 200},
		{"another tenant", "GET", b, apiKey(a), 404},
		{"unknown tenant", "GET", "nobody", apiKey(a), 404},
		{"admin", "GET", b, adminToken, 200},
		{"admin, unknown tenant", "GET", "nobody", adminToken, 404},
		{"no key", "GET", a, "", 401},
		{"unknown key", "GET", a, "wrong", 401},
		{"POST", "POST", a, apiKey(a), 405},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ans := h.request(t, tt.method, "/v1/tenants/"+tt.tenant+"/stats", tt.key, "", "")
			if ans.status != tt.status {
				t.Errorf("%s stats of %s = %d %s, want %d", tt.method, tt.tenant, ans.status, ans.body, tt.status)
			}
		})
	}
}

// TestStatsMeasuredRateAcrossDrainers runs two drainers on one tenant (20
// jobs/s, capacity 1) for a real window of about 2.5 s, stops them and
// reads the stats once that flow lies in complete seconds. measured_rate is
// the units dispatched in the last 10 s ÷ 10: it must equal the sink's
// deliveries ÷ 10 exactly; and the deliveries after the first (the bucket's
// burst of 1) must be 20/s × the time from the first to the last ± 3 (the
// edges of the window and scheduling on a busy machine).
func TestStatsMeasuredRateAcrossDrainers(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "meas")
	sink := newTimingSink(t)
	cfg := visConfig(t, fmt.Sprintf("    outflow: {rate: 20, capacity: 1}\n    target: {url: %q}\n", sink.url), tenant)
	h := startIngest(t, cfg, deps{rdb: rdb})
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	var jobs []queue.Envelope
	for i := range 200 {
		jobs = append(jobs, queue.Envelope{ID: fmt.Sprint(i), Tenant: tenant, Type: "mail", Cost: 1})
	}
	if err := p.Enqueue(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	_, stop1 := runDrainerStop(t, rdb, cfg)
	_, stop2 := runDrainerStop(t, rdb, cfg)
	testenv.WaitFor(t, 3*time.Second, "the first delivery", func() bool { n, _, _ := sink.stats(); return n > 0 })
	time.Sleep(2500 * time.Millisecond)
	stop1()
	stop2()
	n, first, last := sink.stats()
	stopped := redisNow(t, rdb).Unix()
	testenv.WaitFor(t, 2*time.Second, "the next second", func() bool { return redisNow(t, rdb).Unix() > stopped })

	st := h.stats(t, apiKey(tenant), tenant)
	span := last.Sub(first)
	t.Logf("2 drainers at 20/s: %d deliveries, %v from the first to the last; measured_rate %v", n, span, st.Outflow.MeasuredRate)
	if st.Outflow.MeasuredRate != float64(n)/10 {
		t.Errorf("measured_rate = %v, want the %d deliveries ÷ 10", st.Outflow.MeasuredRate, n)
	}
	// The shared bucket never lets the two drainers together exceed the rate
	// (capacity 1, plus 1 for the edges of the span); a loaded machine can
	// make them late, so the lower bound is 60% of the rate. Rate accuracy
	// itself is measured by make bench (deploy/bench/drainbench).
	if want := 20 * span.Seconds(); float64(n-1) > want+2 || float64(n-1) < 0.6*want {
		t.Errorf("%d deliveries after the first in %v, want at most %.1f + 2 and at least 60%% of it", n-1, span, want)
	}
	if st.Backlog != 200-n {
		t.Errorf("backlog = %d, want %d", st.Backlog, 200-n)
	}
}

// timingSink is a real downstream that answers 200 and keeps the count and
// the times of the first and the last delivery.
type timingSink struct {
	url         string
	mu          sync.Mutex
	n           int64
	first, last time.Time
}

func newTimingSink(t testing.TB) *timingSink {
	s := &timingSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.n == 0 {
			s.first = now
		}
		s.n++
		s.last = now
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *timingSink) stats() (n int64, first, last time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n, s.first, s.last
}
