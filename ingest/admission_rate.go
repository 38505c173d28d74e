package ingest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file holds the admitted/s and refused/s of the stats API, and
// sluice_outflow_paused. Each ingest counts its decisions per tenant in
// memory (two atomic adds on the request path, no Redis call) and adds
// them to the tenant's per-second counters in Redis once a second
// (keys.AdmissionRate), one pipelined round trip for all tenants; the stats
// sum the last admissionWindow complete seconds across every instance.

// admissionWindow is the window of the stats' admission rates, in whole
// seconds (the current, incomplete second is left out).
const admissionWindow = 10

// admissionFlushEvery is how often an ingest adds its counts to Redis.
const admissionFlushEvery = time.Second

// admissionCounts is one ingest's admission decisions per tenant since the
// last flush. It is safe for concurrent use.
type admissionCounts struct {
	mu       sync.RWMutex
	byTenant map[string]*decisionCount
}

// decisionCount is one tenant's jobs admitted and refused.
type decisionCount struct{ admitted, refused atomic.Int64 }

func newAdmissionCounts() *admissionCounts {
	return &admissionCounts{byTenant: map[string]*decisionCount{}}
}

// add counts jobs admitted (admitted) or refused with 429 (not admitted)
// for tenant, a configured tenant (so the map stays bounded).
func (a *admissionCounts) add(tenant string, jobs int, admitted bool) {
	a.mu.RLock()
	c, ok := a.byTenant[tenant]
	a.mu.RUnlock()
	if !ok {
		a.mu.Lock()
		if c, ok = a.byTenant[tenant]; !ok {
			c = &decisionCount{}
			a.byTenant[tenant] = c
		}
		a.mu.Unlock()
	}
	if admitted {
		c.admitted.Add(int64(jobs))
	} else {
		c.refused.Add(int64(jobs))
	}
}

// take returns the counts since the last take, by tenant, those with any
// decision only, and starts the next period at zero.
func (a *admissionCounts) take() map[string][2]int64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := map[string][2]int64{}
	for t, c := range a.byTenant {
		if adm, ref := c.admitted.Swap(0), c.refused.Swap(0); adm > 0 || ref > 0 {
			out[t] = [2]int64{adm, ref}
		}
	}
	return out
}

// admissionAddCall is admission_rate_add.lua's call for one tenant's
// counts: KEYS the counters; ARGV admitted, refused, seconds kept, TTL ms.
func admissionAddCall(tenant string, admitted, refused int64) lua.Call {
	return lua.Call{Script: lua.AdmissionRateAdd, Keys: []string{keys.AdmissionRate(tenant)},
		Args: []any{admitted, refused, int64(keys.AdmissionRateTTL / time.Second), keys.AdmissionRateTTL.Milliseconds()}}
}

// flushAdmissions adds the counts taken to Redis in one pipeline: one
// admission_rate_add.lua call per tenant with decisions. It returns the
// first error; counts that were not added are dropped (a rate shown, not a
// ledger), so an outage never piles them into one later second.
func flushAdmissions(ctx context.Context, rdb redis.UniversalClient, counts map[string][2]int64) error {
	if len(counts) == 0 {
		return nil
	}
	tenants := make([]string, 0, len(counts))
	for t := range counts {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	calls := make([]lua.Call, len(tenants))
	for i, t := range tenants {
		calls[i] = admissionAddCall(t, counts[t][0], counts[t][1])
	}
	for i, cmd := range lua.Exec(ctx, rdb, calls, nil) {
		v, err := cmd.Result()
		if err == nil {
			_, err = lua.AdmissionRateAdd.Int(v, "second")
		}
		if err != nil {
			return fmt.Errorf("ingest: add admission counts of %s: %w", tenants[i], err)
		}
	}
	return nil
}

// runAdmissionFlush flushes this ingest's counts every admissionFlushEvery
// until ctx ends, then once more (the requests of the last second, after
// Serve drained them), within the Redis timeout.
func (s *Server) runAdmissionFlush(ctx context.Context) {
	tick := time.NewTicker(admissionFlushEvery)
	defer tick.Stop()
	flush := func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, s.snap.Load().redisTimeout)
		defer cancel()
		if err := flushAdmissions(ctx, s.rdb, s.admissions.take()); err != nil {
			s.log.Debug("ingest: admission counts not added; this second's rates lack them", "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			flush(context.WithoutCancel(ctx))
			return
		case <-tick.C:
			flush(ctx)
		}
	}
}

// admissionReadCall is admission_rate_read.lua's call: KEYS the counters;
// ARGV the window.
func admissionReadCall(tenant string) lua.Call {
	return lua.Call{Script: lua.AdmissionRateRead, Keys: []string{keys.AdmissionRate(tenant)}, Args: []any{admissionWindow}}
}

// parseAdmissionRead checks admission_rate_read.lua's reply, two integers
// >= 0 (admitted, refused), and returns them as jobs per second over the
// window. Its error wraps lua.ErrReply.
func parseAdmissionRead(v any) (admissionAnswer, error) {
	n, err := lua.AdmissionRateRead.Ints(v, 2)
	if err == nil && (n[0] < 0 || n[1] < 0) {
		err = lua.AdmissionRateRead.ReplyError("negative counts %v", n)
	}
	if err != nil {
		return admissionAnswer{}, err
	}
	return admissionAnswer{AdmittedRate: float64(n[0]) / admissionWindow, RefusedRate: float64(n[1]) / admissionWindow}, nil
}

// admissionAnswer is the "admission" object of the stats answer.
type admissionAnswer struct {
	// AdmittedRate is the jobs admitted per second (202) across all ingest
	// instances over the last admissionWindow complete seconds.
	AdmittedRate float64 `json:"admitted_rate"`
	// RefusedRate is the jobs refused per second with 429 (a policy or the
	// backlog gate) over the same window.
	RefusedRate float64 `json:"refused_rate"`
}
