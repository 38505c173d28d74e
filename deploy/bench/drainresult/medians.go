package drainresult

import (
	"slices"
)

// TputMedian is one drain row over a run's rounds: the median of the
// rounds' figures and of their ratios to the row's peers of the same round
// (issue 11 requirement 2: "median of at least three alternated pairs").
// Medians builds it from the per-round Throughput rows; drainbench's report
// and deploy/bench/summary both read it, so both state the same figures.
//
// A round counts for a figure when its row ran (no Err, not Skipped, Rate >
// 0); a ratio's round counts when both of its rows ran in that round.
type TputMedian struct {
	System   string `json:"system"`
	Backend  string `json:"backend"`
	Consumer string `json:"consumer"`
	Workers  int    `json:"workers"`
	Tenants  int    `json:"tenants"`
	Jobs     int    `json:"jobs"`
	// Rates is the jobs/s of every round that ran, in round order; Rate is
	// their median (0 when none ran).
	Rates []float64 `json:"rates"`
	Rate  float64   `json:"jobs_per_s"`
	// Cmds and Scripts are the medians of the rounds' Redis commands and
	// script calls per job, over the rounds that read them (0: none did).
	Cmds    float64 `json:"cmds_per_job"`
	Scripts float64 `json:"scripts_per_job"`
	// VsBullRounds is, per round, Rate ÷ the rate of BullMQ's comparable
	// row of the same round (same workers; http vs http, handler vs noop);
	// VsBull is its median. Empty and 0 for BullMQ rows and when no round
	// has both.
	VsBullRounds []float64 `json:"vs_bullmq_rounds,omitempty"`
	VsBull       float64   `json:"vs_bullmq,omitempty"`
	// VsOneRounds is, for a sluice row of more than one tenant, per round
	// Rate ÷ the rate of the same backend, consumer and workers with one
	// tenant in the same round; VsOne is its median.
	VsOneRounds []float64 `json:"vs_one_tenant_rounds,omitempty"`
	VsOne       float64   `json:"vs_one_tenant,omitempty"`
}

// Median is the median of vs (the mean of the middle two for an even
// count; 0 for none). vs is not changed.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}

// tputKey names a drain row apart from its round.
type tputKey struct {
	system, backend, consumer string
	workers, tenants          int
}

func keyOf(t Throughput) tputKey {
	return tputKey{t.System, t.Backend, t.Consumer, t.Workers, t.Tenants}
}

// ran reports whether a round's row produced a rate.
func (t Throughput) ran() bool { return t.Err == "" && t.Skipped == "" && t.Rate > 0 }

// bullPeer is the key of BullMQ's row that a sluice row of consumer with
// workers is compared with: the no-op processor for the Go Handler, the
// HTTP worker for HTTP.
func bullPeer(t Throughput) tputKey {
	c := "http"
	if t.Consumer == "handler" {
		c = "noop"
	}
	return tputKey{"bullmq", "redis", c, t.Workers, 1}
}

// Medians groups rows (one per row and round, as drainbench writes them)
// by system, backend, consumer, workers and tenants, and returns each
// group's medians: by workers, sluice's rows before BullMQ's, otherwise in
// the order the rows first appear.
func Medians(rows []Throughput) []TputMedian {
	type roundKey struct {
		k     tputKey
		round int
	}
	rate := map[roundKey]float64{}
	var order []tputKey
	byKey := map[tputKey][]Throughput{}
	for _, t := range rows {
		k := keyOf(t)
		if _, seen := byKey[k]; !seen {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], t)
		if t.ran() {
			rate[roundKey{k, t.Round}] = t.Rate
		}
	}
	slices.SortStableFunc(order, func(a, b tputKey) int {
		if a.workers != b.workers {
			return a.workers - b.workers
		}
		return boolInt(a.system == "bullmq") - boolInt(b.system == "bullmq")
	})
	out := make([]TputMedian, 0, len(order))
	for _, k := range order {
		m := TputMedian{System: k.system, Backend: k.backend, Consumer: k.consumer, Workers: k.workers, Tenants: k.tenants}
		var cmds, scripts []float64
		for _, t := range byKey[k] {
			m.Jobs = t.Jobs
			if !t.ran() {
				continue
			}
			m.Rates = append(m.Rates, t.Rate)
			if t.Cmds > 0 {
				cmds, scripts = append(cmds, t.Cmds), append(scripts, t.Scripts)
			}
			if k.system == "bullmq" {
				continue
			}
			if p, ok := rate[roundKey{bullPeer(t), t.Round}]; ok {
				m.VsBullRounds = append(m.VsBullRounds, t.Rate/p)
			}
			one := k
			one.tenants = 1
			if p, ok := rate[roundKey{one, t.Round}]; ok && k.tenants != 1 {
				m.VsOneRounds = append(m.VsOneRounds, t.Rate/p)
			}
		}
		m.Rate, m.Cmds, m.Scripts = Median(m.Rates), Median(cmds), Median(scripts)
		m.VsBull, m.VsOne = Median(m.VsBullRounds), Median(m.VsOneRounds)
		out = append(out, m)
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
