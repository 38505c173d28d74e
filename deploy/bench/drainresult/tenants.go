package drainresult

import "math"

// Tenants is one scenario of drainbench's tenants part (issue 11
// requirement 3): one cmd/drainer process with Configured tenants, of which
// Active have a backlog and outflow.rate 1, measured over a window.
type Tenants struct {
	// Scenario is "active" (A: every configured tenant active) or
	// "configured" (B: Configured tenants, Active of them with jobs).
	Scenario   string `json:"scenario"`
	Configured int    `json:"configured"`
	Active     int    `json:"active"`
	// Rate is each active tenant's outflow.rate, jobs/s.
	Rate float64 `json:"rate"`
	// WindowS is the measuring window, seconds; it opened WarmupS after
	// the first arrival.
	WindowS float64 `json:"window_s"`
	WarmupS float64 `json:"warmup_s"`
	// ReadyS is from the drainer's start to its first 200 on /readyz.
	ReadyS float64 `json:"ready_s"`
	// Jobs is how many jobs were pre-loaded (over the active tenants).
	Jobs int `json:"jobs"`
	// Arrivals is the jobs that reached the sink inside the window and
	// Aggregate that ÷ WindowS, jobs/s (goal Active × Rate).
	Arrivals  int     `json:"arrivals"`
	Aggregate float64 `json:"aggregate"`
	// WorstErrPct is the largest |rate − Rate| ÷ Rate × 100 over the active
	// tenants with at least 2 arrivals in the window, each tenant's rate
	// being (k − 1) ÷ (t_k − t_1) of its k arrivals; WorstTenant names it.
	WorstErrPct float64 `json:"worst_err_pct"`
	WorstTenant string  `json:"worst_tenant"`
	// Over counts the active tenants over 1 % error, Failed (those with
	// fewer than 2 arrivals in the window) included.
	Over   int `json:"over"`
	Failed int `json:"failed"`
	// CountMin and CountMax are the fewest and most arrivals of one active
	// tenant in the window.
	CountMin int `json:"count_min"`
	CountMax int `json:"count_max"`
	// Dups counts arrivals of a job id that had already arrived, over the
	// whole scenario (warm-up included): a lease lost under load.
	Dups int `json:"dups"`
	// RSSMax and RSSEnd are the drainer's VmRSS, bytes: the most of the
	// once-a-second samples in the window, and at its end.
	RSSMax int64 `json:"rss_max"`
	RSSEnd int64 `json:"rss_end"`
	// Goroutines is the drainer's go_goroutines at the window's end (-1
	// when it could not be read).
	Goroutines float64 `json:"goroutines"`
	// DrainerCPUS is the drainer's utime + stime over the window, seconds.
	DrainerCPUS float64 `json:"drainer_cpu_s"`
	// RedisMemory is INFO memory used_memory at the window's end, bytes.
	RedisMemory int64 `json:"redis_used_memory"`
	// RedisCmdsPerS is the server's commands (INFO commandstats) per second
	// over the window, scripts' commands included; RedisCPUS its
	// used_cpu_sys + used_cpu_user over the window, seconds.
	RedisCmdsPerS float64 `json:"redis_cmds_per_s"`
	RedisCPUS     float64 `json:"redis_cpu_s"`
	// Err is the scenario's failure, empty when it ran.
	Err string `json:"err,omitempty"`
	// Round numbers a run of the scenario (1, 2, ...; 0 in a report from
	// before rounds): the part runs A and B in alternated order, round 1 A
	// then B, round 2 B then A, so a host that drifts over the part weighs
	// on both alike. Runs is how many runs a row of MergeTenants sums up.
	Round int `json:"round,omitempty"`
	Runs  int `json:"runs,omitempty"`
}

// ScenarioOf merges the runs of scenario name in rows (MergeTenants); ok
// is false when it has none.
func ScenarioOf(rows []Tenants, name string) (Tenants, bool) {
	var runs []Tenants
	for _, t := range rows {
		if t.Scenario == name {
			runs = append(runs, t)
		}
	}
	if len(runs) == 0 {
		return Tenants{}, false
	}
	return MergeTenants(runs), true
}

// MergeTenants sums up runs of one scenario into one row: the mean of the
// costs (drainer CPU, Redis memory, commands/s and CPU), so B ÷ A of
// alternated rounds weighs the host's drift on both alike; the worst of
// the bounds (the aggregate farthest from its goal, the worst tenant, the
// most tenants over 1 %, the fewest and most arrivals, the slowest start,
// the largest RSS and goroutine count); the sum of arrivals and
// duplicates; the first failure. runs must be one scenario's, not empty.
func MergeTenants(runs []Tenants) Tenants {
	m := runs[0]
	m.Round, m.Runs = 0, len(runs)
	goal := float64(m.Active) * m.Rate
	for _, t := range runs[1:] {
		m.ReadyS = math.Max(m.ReadyS, t.ReadyS)
		m.Arrivals += t.Arrivals
		if math.Abs(t.Aggregate-goal) > math.Abs(m.Aggregate-goal) {
			m.Aggregate = t.Aggregate
		}
		if t.WorstErrPct > m.WorstErrPct {
			m.WorstErrPct, m.WorstTenant = t.WorstErrPct, t.WorstTenant
		}
		m.Over, m.Failed = max(m.Over, t.Over), max(m.Failed, t.Failed)
		m.CountMin, m.CountMax = min(m.CountMin, t.CountMin), max(m.CountMax, t.CountMax)
		m.Dups += t.Dups
		m.RSSMax, m.RSSEnd = max(m.RSSMax, t.RSSMax), max(m.RSSEnd, t.RSSEnd)
		m.Goroutines = math.Max(m.Goroutines, t.Goroutines)
		m.DrainerCPUS += t.DrainerCPUS
		m.RedisMemory += t.RedisMemory
		m.RedisCmdsPerS += t.RedisCmdsPerS
		m.RedisCPUS += t.RedisCPUS
		if m.Err == "" {
			m.Err = t.Err
		}
	}
	n := float64(len(runs))
	m.DrainerCPUS /= n
	m.RedisMemory = int64(float64(m.RedisMemory) / n)
	m.RedisCmdsPerS /= n
	m.RedisCPUS /= n
	return m
}

// TenantsCompare is what the tenants part derives from scenario B
// ("configured") against A ("active"), the same active tenants in both.
type TenantsCompare struct {
	// Idle is B's configured tenants without jobs: Configured − Active.
	Idle int `json:"idle"`
	// MemoryPerIdle is (B's RedisMemory − A's) ÷ Idle, bytes, and
	// CmdsPerIdle (B's RedisCmdsPerS − A's) ÷ Idle, commands/s.
	MemoryPerIdle float64 `json:"redis_memory_per_idle"`
	CmdsPerIdle   float64 `json:"redis_cmds_per_s_per_idle"`
	// Ratios are B's figure ÷ A's, in Figures' order.
	Ratios []Ratio `json:"ratios"`
	// Met is true when every ratio is Within.
	Met bool `json:"met"`
}

// Ratio is one of B's figures against A's.
type Ratio struct {
	Figure string  `json:"figure"`
	A      float64 `json:"a"`
	B      float64 `json:"b"`
	Ratio  float64 `json:"ratio"` // B ÷ A; 0 when A is 0
	// Within is true when the ratio is in [0.9, 1.1]; for the worst error
	// also when B's worst error is at most max(1.1 × A's, 1 %), the
	// per-tenant goal, since both are then noise below it, and B has no
	// more tenants without a rate (Failed) than A.
	Within bool `json:"within"`
}

// Figures names the figures CompareTenants compares, in order.
var Figures = []string{"aggregate jobs/s", "worst tenant error %", "drainer RSS max", "goroutines", "drainer CPU s"}

// CompareTenants derives B's figures against A's (see TenantsCompare); ok
// is false when either scenario failed or B has no idle tenant.
func CompareTenants(a, b Tenants) (c TenantsCompare, ok bool) {
	c.Idle = b.Configured - b.Active
	if a.Err != "" || b.Err != "" || c.Idle <= 0 {
		return c, false
	}
	c.MemoryPerIdle = float64(b.RedisMemory-a.RedisMemory) / float64(c.Idle)
	c.CmdsPerIdle = (b.RedisCmdsPerS - a.RedisCmdsPerS) / float64(c.Idle)
	pairs := [][2]float64{
		{a.Aggregate, b.Aggregate}, {a.WorstErrPct, b.WorstErrPct},
		{float64(a.RSSMax), float64(b.RSSMax)}, {a.Goroutines, b.Goroutines}, {a.DrainerCPUS, b.DrainerCPUS},
	}
	c.Met = true
	for i, p := range pairs {
		r := Ratio{Figure: Figures[i], A: p[0], B: p[1]}
		if p[0] != 0 {
			r.Ratio = p[1] / p[0]
		}
		r.Within = p[0] > 0 && math.Abs(r.Ratio-1) <= 0.1+1e-9
		if i == 1 {
			r.Within = p[1] <= math.Max(1.1*p[0], TenantsGoalPct) && b.Failed <= a.Failed
		}
		c.Ratios = append(c.Ratios, r)
		c.Met = c.Met && r.Within
	}
	return c, true
}

// TenantsGoalPct is issue 11 requirement 3's bound on each tenant's rate
// error, and on the aggregate's, %.
const TenantsGoalPct = 1

// AggregateMet reports whether the scenario ran and its aggregate is within
// TenantsGoalPct of Active × Rate.
func (t Tenants) AggregateMet() bool {
	goal := float64(t.Active) * t.Rate
	return t.Err == "" && goal > 0 && math.Abs(t.Aggregate-goal) <= goal*TenantsGoalPct/100
}

// WorstMet reports whether the scenario ran and every active tenant's rate
// is within TenantsGoalPct of Rate (none without a rate).
func (t Tenants) WorstMet() bool {
	return t.Err == "" && t.Over == 0 && t.WorstErrPct <= TenantsGoalPct
}
