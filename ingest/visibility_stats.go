package ingest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/outflow"
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
	// DLQ counts the tenant's dead letters (the size of its dead index,
	// keys.JobIndex(t, "dead"), on both backends; package dlq).
	DLQ int64 `json:"dlq"`
	// ETASeconds is Backlog ÷ Outflow.EffectiveRate; null when the tenant's
	// outflow is unlimited (Outflow.Unlimited). A paused tenant keeps it:
	// the time its backlog takes once resumed.
	ETASeconds *float64 `json:"eta_seconds"`
	// Paused is outflow.paused: no drainer starts a delivery of the
	// tenant's jobs (ingest still admits them, up to max_backlog).
	Paused bool `json:"paused"`
	// Admission is the tenant's jobs admitted and refused per second
	// across all ingest instances (admission_rate.go).
	Admission admissionAnswer `json:"admission"`
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
	// recovers, as the bucket script computes it (outflow.Limit.At).
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

// readStats reads tenant's figures in one round trip of two script calls
// (lua/tenant_stats.lua and lua/admission_rate_read.lua) and computes the
// rates and the water level from them.
func (s *Server) readStats(ctx context.Context, snap *snapshot, tenant string) (statsAnswer, error) {
	cmds := lua.Exec(ctx, s.rdb, statsCalls(tenant), nil)
	return statsFromReplies(snap, tenant, cmds[0], cmds[1])
}

// statsCalls are the calls that read one tenant's stats (one pipeline):
// statsCall and admissionReadCall; statsFromReplies reads their replies.
func statsCalls(tenant string) []lua.Call {
	return []lua.Call{statsCall(tenant), admissionReadCall(tenant)}
}

// statsFromReplies is tenant's stats from the replies of its statsCalls:
// stats of tenant_stats.lua, adm of admission_rate_read.lua.
func statsFromReplies(snap *snapshot, tenant string, stats, adm *redis.Cmd) (statsAnswer, error) {
	v, err := stats.Result()
	if err != nil {
		return statsAnswer{}, fmt.Errorf("ingest: stats of %s: %w", tenant, err)
	}
	res, err := parseStats(v)
	if err != nil {
		return statsAnswer{}, fmt.Errorf("ingest: stats of %s: %w", tenant, err)
	}
	v, err = adm.Result()
	var rates admissionAnswer
	if err == nil {
		rates, err = parseAdmissionRead(v)
	}
	if err != nil {
		return statsAnswer{}, fmt.Errorf("ingest: stats of %s: admission rates: %w", tenant, err)
	}
	var o config.Outflow
	if ts := snap.tenants[tenant]; ts != nil {
		o = ts.outflow
	}
	st := computeStats(tenant, o, res)
	st.Admission = rates
	return st, nil
}

// statsCall is tenant_stats.lua's call: KEYS backlog, override, water,
// delivering, dead index, outflow per second, the leases (Redis backend;
// none on Kafka); ARGV the window.
func statsCall(tenant string) lua.Call {
	return lua.Call{Script: lua.TenantStats, Keys: []string{
		keys.Backlog(tenant), keys.Override(tenant), keys.Water(tenant), keys.Delivering(tenant),
		keys.JobIndex(tenant, "dead"), keys.Outflow(tenant), keys.Processing(tenant),
	}, Args: []any{measureWindow}}
}

// parseStats checks tenant_stats.lua's reply: 12 strings (statsOf reads
// them). Its error wraps lua.ErrReply.
func parseStats(v any) ([]string, error) {
	res, err := lua.TenantStats.Strings(v)
	if err == nil && len(res) != 12 {
		err = lua.TenantStats.ReplyError("%d values, want 12", len(res))
	}
	return res, err
}

// tenantStats is tenant_stats.lua's reply, by name.
type tenantStats struct {
	NowMicro float64       // Redis TIME, unix µs
	Backlog  int64         // keys.Backlog
	Outflow  outflow.State // the override and water hashes
	InFlight int64         // deliveries whose deadline has not passed
	DLQ      int64         // the dead index's size
	Units    float64       // units dispatched in the measuring window
}

// statsOf names the 12 values of tenant_stats.lua's reply. Stored values
// are read defensively: a missing, malformed or non-finite number is 0
// (NaN or ±Inf would make the answer unencodable), and a count beyond
// int64 is the largest int64, never wrapped.
func statsOf(res []string) tenantStats {
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
	return tenantStats{
		NowMicro: num(0), Backlog: count(1),
		Outflow: outflow.State{
			OverrideRate: num(2), OverrideCapacity: num(3), WaterMicro: num(4), TSMicro: num(5),
			Eff: num(6), EffTSMicro: num(7), EffInc: num(8),
		},
		InFlight: count(9), DLQ: count(10), Units: num(11),
	}
}

// computeStats turns the raw values of tenant_stats.lua (12, parseStats)
// into the answer, for a tenant configured with outflow o. The rates and the level are
// outflow.Limit.At's, the drainers' formulas: an unlimited outflow has no
// bucket and ignores the override; the override (when > 0) replaces a
// configured rate and capacity.
func computeStats(tenant string, o config.Outflow, res []string) statsAnswer {
	st := statsOf(res)
	out := statsAnswer{Tenant: tenant, Backlog: st.Backlog, InFlight: st.InFlight, DLQ: st.DLQ, Paused: o.Paused}
	out.Outflow.MeasuredRate = st.Units / measureWindow
	lim := outflow.Of(o)
	if !lim.Shaped() {
		out.Outflow.Unlimited = true
		return out
	}
	lv := lim.At(st.Outflow, st.NowMicro)
	out.Outflow.ConfiguredRate, out.Outflow.Capacity, out.Outflow.EffectiveRate = lv.Rate, lv.Capacity, lv.Effective
	out.WaterLevel = lv.Water
	if lv.Effective <= 0 {
		return out
	}
	if eta := float64(out.Backlog) / lv.Effective; !math.IsInf(eta, 0) {
		out.ETASeconds = &eta
	}
	return out
}
