package ingest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// measureWindow is the window of the measured outflow rate, in whole
// seconds (the current, incomplete second is left out).
const measureWindow = 10

// statsAnswer is the answer of GET /v1/tenants/{id}/stats.
type statsAnswer struct {
	Tenant string `json:"tenant"`
	// Backlog is the tenant's queued, not yet finished units (keys.Backlog):
	// a cancelled job counts until a drainer drops it at the head of its
	// lane.
	Backlog int64         `json:"backlog"`
	Outflow outflowAnswer `json:"outflow"`
	// WaterLevel is the shared leaky bucket's level now, in units: the
	// stored level minus what leaked since at the effective rate.
	WaterLevel float64 `json:"water_level"`
	// InFlight counts deliveries in progress across all drainers
	// (keys.Delivering members whose deadline has not passed).
	InFlight int64 `json:"in_flight"`
	// DLQ counts dead jobs: the length of the tenant's dead-letter list
	// (Redis backend), or its counter of records written to the DLQ topic
	// (Kafka backend, keys.DLQCount).
	DLQ int64 `json:"dlq"`
	// ETASeconds is Backlog ÷ Outflow.EffectiveRate; null when the tenant's
	// outflow is unlimited (Outflow.Unlimited).
	ETASeconds *float64 `json:"eta_seconds"`
}

// outflowAnswer compares the tenant's outflow rates, in units per second.
type outflowAnswer struct {
	// Unlimited is outflow.unlimited: delivery is not rate-limited, and the
	// rates and capacity below are 0.
	Unlimited bool `json:"unlimited"`
	// ConfiguredRate is outflow.rate, or the runtime override
	// (keys.Override outflow_rate) that the drainers apply.
	ConfiguredRate float64 `json:"configured_rate"`
	// EffectiveRate is ConfiguredRate lowered by adaptive backoff while it
	// recovers, as the bucket script computes it (lua/leaky_bucket.lua).
	EffectiveRate float64 `json:"effective_rate"`
	// MeasuredRate is the units dispatched across all drainers in the last
	// measureWindow complete seconds (keys.Outflow, Redis TIME) ÷ the window.
	MeasuredRate float64 `json:"measured_rate"`
	// Capacity is the bucket's size: the override, or outflow.capacity, or
	// max(1, outflow.rate), as the drainers apply it.
	Capacity float64 `json:"capacity"`
}

// handleStats serves GET /v1/tenants/{id}/stats.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		writeProblem(w, newProblem(http.StatusMethodNotAllowed, "", r.Method+" is not allowed here; use GET"))
		return
	}
	snap := s.snap.Load()
	v, p := s.authenticateViewer(r, snap)
	if p != nil {
		writeProblem(w, p)
		return
	}
	tenant := r.PathValue("id")
	if _, ok := snap.tenants[tenant]; !ok || !keys.ValidTenant(tenant) || (v.tenant != "" && v.tenant != tenant) {
		writeProblem(w, notFound("tenant", tenant))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), visibilityTimeout)
	defer cancel()
	st, err := s.readStats(ctx, snap, tenant)
	if err != nil {
		writeProblem(w, s.redisProblem(snap, "tenant stats", err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// readStats reads tenant's figures in one script call (lua/tenant_stats.lua)
// and computes the rates and the water level from them.
func (s *Server) readStats(ctx context.Context, snap *snapshot, tenant string) (statsAnswer, error) {
	res, err := lua.TenantStats.Run(ctx, s.rdb, []string{
		keys.Backlog(tenant), keys.Override(tenant), keys.Water(tenant), keys.Delivering(tenant),
		keys.DLQ(tenant), keys.DLQCount(tenant), keys.Outflow(tenant),
	}, measureWindow).StringSlice()
	if err != nil {
		return statsAnswer{}, fmt.Errorf("ingest: stats of %s: %w", tenant, err)
	}
	if len(res) != 13 {
		return statsAnswer{}, fmt.Errorf("ingest: stats of %s: reply has %d values, want 13", tenant, len(res))
	}
	var o config.Outflow
	if ts := snap.tenants[tenant]; ts != nil {
		o = ts.outflow
	}
	return computeStats(tenant, o, snap.backend, res), nil
}

// computeStats turns the raw values of tenant_stats.lua into the answer,
// for a tenant configured with outflow o (defaults applied) on the queue
// backend ("redis" or "kafka").
func computeStats(tenant string, o config.Outflow, backend string, res []string) statsAnswer {
	// Stored values are read defensively: a missing, malformed or
	// non-finite number is 0 (NaN or ±Inf would make the answer unencodable),
	// and a count beyond int64 is the largest int64, never wrapped.
	num := func(i int) float64 {
		f, err := strconv.ParseFloat(res[i], 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0
		}
		return f
	}
	count := func(i int) int64 {
		if n, err := strconv.ParseInt(res[i], 10, 64); err == nil {
			return max(n, 0)
		}
		switch f := num(i); {
		case f <= 0:
			return 0
		case f >= math.MaxInt64:
			return math.MaxInt64
		default:
			return int64(f)
		}
	}
	nowUS := num(0)
	out := statsAnswer{Tenant: tenant, Backlog: count(1), InFlight: count(9)}
	if backend == "kafka" {
		out.DLQ = count(11)
	} else {
		out.DLQ = count(10)
	}
	out.Outflow.MeasuredRate = num(12) / measureWindow

	// As the drainers do (drainer.outflowOf, limits.Leaky): an unlimited
	// outflow has no bucket and ignores the override; the override (when
	// > 0) replaces a configured rate and capacity.
	if !o.Shaped() {
		out.Outflow.Unlimited = true
		return out
	}
	rate, capacity := o.Rate, o.BucketCapacity()
	if ov := num(2); ov > 0 {
		rate = ov
	}
	if ov := num(3); ov > 0 {
		capacity = ov
	}
	out.Outflow.ConfiguredRate, out.Outflow.Capacity = rate, capacity
	eff := adaptiveRate(rate, num(6), num(7), num(8), nowUS)
	out.Outflow.EffectiveRate = eff
	if eff <= 0 {
		return out
	}
	// leaky_bucket.lua: water (micro-units) leaks at the effective rate
	// since ts (µs).
	water := num(4) - max(nowUS-num(5), 0)*eff
	out.WaterLevel = max(water, 0) / 1e6
	if math.IsInf(out.WaterLevel, 0) || math.IsNaN(out.WaterLevel) {
		out.WaterLevel = 0
	}
	if eta := float64(out.Backlog) / eff; !math.IsInf(eta, 0) {
		out.ETASeconds = &eta
	}
	return out
}

// adaptiveRate is the rate the outflow bucket uses now (lua/leaky_bucket.lua,
// drainer.EffectiveRate): rate, lowered to eff at effTS (µs) after a
// downstream 429/503 and recovering by inc units/s every second since.
// Without adaptive state (eff 0) it is rate.
func adaptiveRate(rate, eff, effTS, inc, nowUS float64) float64 {
	if eff <= 0 {
		return rate
	}
	return min(rate, eff+max(nowUS-effTS, 0)/1e6*inc)
}
