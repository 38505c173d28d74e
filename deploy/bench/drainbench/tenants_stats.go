package main

import (
	"math"
	"strings"
	"time"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// tenantOf is the tenant of a job id "<tenant>-<i>" (jobs' ids): the id up
// to its last "-"; an id without one is its own tenant.
func tenantOf(id string) string {
	if i := strings.LastIndexByte(id, '-'); i >= 0 {
		return id[:i]
	}
	return id
}

// tenantRate is one tenant's arrivals inside a window: how many, and the
// rate they show, (k − 1) ÷ (t_k − t_1) of its k arrivals (0 when k < 2 or
// they share one instant). A count over a fixed window is off by ±1 at its
// edges; the first-to-last estimate is not.
type tenantRate struct {
	count       int
	first, last time.Time
}

func (r tenantRate) rate() float64 {
	d := r.last.Sub(r.first).Seconds()
	if r.count < 2 || d <= 0 {
		return 0
	}
	return float64(r.count-1) / d
}

// tenantRates groups the arrivals inside [from, to) by tenant (tenantOf).
func tenantRates(arr []arrival, from, to time.Time) map[string]tenantRate {
	out := map[string]tenantRate{}
	for _, a := range arr {
		if a.at.Before(from) || !a.at.Before(to) {
			continue
		}
		t := tenantOf(a.id)
		r := out[t]
		if r.count == 0 || a.at.Before(r.first) {
			r.first = a.at
		}
		if a.at.After(r.last) {
			r.last = a.at
		}
		r.count++
		out[t] = r
	}
	return out
}

// measureTenants fills the rate figures of res from the arrivals (any
// order) inside the window [from, from+window): Arrivals and Aggregate over
// every arrival there; the per-tenant figures over active, each tenant at
// target jobs/s. A tenant with fewer than 2 arrivals in the window has no
// rate: it counts in Failed and Over, not in WorstErrPct.
func measureTenants(res *drainresult.Tenants, arr []arrival, from time.Time, window time.Duration, active []string, target float64) {
	rates := tenantRates(arr, from, from.Add(window))
	res.Arrivals = 0
	for _, r := range rates {
		res.Arrivals += r.count
	}
	res.Aggregate = float64(res.Arrivals) / window.Seconds()
	res.WorstErrPct, res.WorstTenant, res.Over, res.Failed = 0, "", 0, 0
	for i, t := range active {
		r := rates[t]
		if i == 0 || r.count < res.CountMin {
			res.CountMin = r.count
		}
		if i == 0 || r.count > res.CountMax {
			res.CountMax = r.count
		}
		if r.rate() == 0 {
			res.Failed++
			res.Over++
			continue
		}
		e := math.Abs(r.rate()-target) / target * 100
		if e > drainresult.TenantsGoalPct {
			res.Over++
		}
		if res.WorstTenant == "" || e > res.WorstErrPct {
			res.WorstErrPct, res.WorstTenant = e, t
		}
	}
}
