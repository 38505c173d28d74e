package outflow

import "math"

// State is a tenant's stored outflow state as the scripts read it, in their
// units (lua/tenant_stats.lua returns it raw). A missing value is 0.
type State struct {
	// OverrideRate and OverrideCapacity are the keys.Override fields
	// outflow_rate (units/s) and outflow_capacity (units); one that is not
	// positive is no override.
	OverrideRate, OverrideCapacity float64
	// WaterMicro is the stored level in micro-units, at TSMicro (unix µs).
	WaterMicro, TSMicro float64
	// Eff is the adaptive rate (units/s) drain_adapt.lua set at EffTSMicro
	// (unix µs), recovering by EffInc units/s every second; Eff 0 is none.
	// A TSMicro or EffTSMicro of 0 is a field not stored, read as now, as
	// leaky_bucket.lua reads it: no leak and no recovery are invented.
	Eff, EffTSMicro, EffInc float64
}

// Level is a tenant's bucket at an instant (Limit.At).
type Level struct {
	// Rate is the configured rate, or the override that replaces it.
	Rate float64
	// Capacity is the configured capacity, or the override.
	Capacity float64
	// Effective is Rate lowered by adaptive backoff while it recovers: the
	// rate the bucket leaks at now.
	Effective float64
	// Water is the level now in units: the stored level less what leaked
	// since at Effective, at least 0.
	Water float64
}

// At returns the bucket of a tenant limited by l whose stored state is s,
// at the instant nowMicro (unix µs), with the formulas of
// lua/leaky_bucket.lua (the authority; this is the one Go copy, for
// readers of the stored state):
//
//	rate      = override outflow_rate when > 0, else l.Rate
//	effective = min(rate, eff + (now − eff_ts) × eff_inc)  (rate without eff)
//	water     = max(0, water − (now − ts) × effective)
//
// A limit that is not Shaped has no bucket: the zero Level. A result that
// is not finite is 0.
func (l Limit) At(s State, nowMicro float64) Level {
	if !l.Shaped() {
		return Level{}
	}
	lv := Level{Rate: l.Rate, Capacity: l.Capacity}
	if s.OverrideRate > 0 {
		lv.Rate = s.OverrideRate
	}
	if s.OverrideCapacity > 0 {
		lv.Capacity = s.OverrideCapacity
	}
	lv.Effective = lv.Rate
	if s.Eff > 0 {
		// As the script: an absurd eff (inf, NaN) fails the comparison and
		// leaves the rate alone.
		if e := s.Eff + max(nowMicro-orNow(s.EffTSMicro, nowMicro), 0)/1e6*s.EffInc; e < lv.Effective {
			lv.Effective = e
		}
	}
	if !(lv.Effective > 0) {
		return lv
	}
	water := max(s.WaterMicro-max(nowMicro-orNow(s.TSMicro, nowMicro), 0)*lv.Effective, 0) / micro
	if !math.IsInf(water, 0) && !math.IsNaN(water) {
		lv.Water = water
	}
	return lv
}

// orNow is ts, or now for a timestamp not stored (0).
func orNow(ts, now float64) float64 {
	if ts == 0 {
		return now
	}
	return ts
}
