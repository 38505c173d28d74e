// Package drainresult is the machine-readable form of one drainbench run:
// drainbench writes it (BENCH_JSON) and deploy/bench/summary reads it, so
// both sides share one definition of every field.
package drainresult

import (
	"encoding/json"
	"fmt"
	"os"
)

// Report is one drainbench run.
type Report struct {
	// Started is the run's start, RFC 3339 UTC.
	Started string `json:"started"`
	// Quick is true for the BENCH_QUICK=1 subset.
	Quick bool `json:"quick"`
	// Command is the command the report prints.
	Command string `json:"command"`
	// Machine describes CPUs, software and Redis, one line each.
	Machine []string `json:"machine"`
	// LoadStart and LoadEnd are /proc/loadavg's first three fields.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
	// CmdsExact is true when the Redis server was private to the run, so
	// the per-job command counts count nobody else.
	CmdsExact bool       `json:"cmds_exact"`
	Accuracy  []Accuracy `json:"accuracy"`
	// TputRounds is how many rounds of the throughput rows the run asked
	// for (BENCH_TPUT_ROUNDS).
	TputRounds int `json:"tput_rounds"`
	// Throughput holds one row per drain row and round, in run order.
	Throughput []Throughput `json:"throughput"`
	// TputMedians is Medians(Throughput): each drain row's medians over
	// the rounds, the figures deploy/bench/summary states.
	TputMedians []TputMedian `json:"tput_medians"`
	// Tenants holds the tenants part's scenarios in run order (A "active",
	// then B "configured"); TenantsCompare is CompareTenants(A, B), nil
	// when either is missing or failed.
	Tenants        []Tenants       `json:"tenants,omitempty"`
	TenantsCompare *TenantsCompare `json:"tenants_compare,omitempty"`
}

// Accuracy is one accuracy row: a system draining one tenant or queue at
// a target rate with a number of worker processes.
type Accuracy struct {
	System string `json:"system"` // sluice | bullmq
	// Backend is sluice's queue backend, redis | kafka (BullMQ: redis);
	// files written before the accuracy rows ran on Kafka hold Redis rows.
	Backend  string  `json:"backend"`
	Rate     float64 `json:"rate"` // target, jobs/s
	Workers  int     `json:"workers"`
	Capacity float64 `json:"capacity"` // sluice: outflow.capacity; BullMQ: limiter max
	Jobs     int     `json:"jobs"`     // arrivals in the steady window
	Achieved float64 `json:"achieved"` // jobs/s
	ErrPct   float64 `json:"err_pct"`  // (achieved − rate) ÷ rate × 100
	// MaxWindow is the most arrivals in any sliding 1-s window of the row,
	// start-up included, at the sink; the bound is Rate + Capacity.
	MaxWindow int `json:"max_window"`
	// MaxSent is the same by the workers' send time (Sluice-Sent-At): what
	// the throttle let go, before the delivery latency's spread. 0 when not
	// measured (files from before the header).
	MaxSent int `json:"max_sent,omitempty"`
	// GapSDMs is the SD of the gaps between consecutive arrivals at the
	// sink in the steady window; GapSDSentMs the same by send time (the
	// inter-dispatch gaps), 0 when not measured.
	GapSDMs     float64 `json:"gap_sd_ms"`
	GapSDSentMs float64 `json:"gap_sd_sent_ms,omitempty"`
	// Cmds and Scripts are Redis commands and script calls per delivered
	// job (INFO commandstats; 0 when not read).
	Cmds    float64 `json:"cmds_per_job"`
	Scripts float64 `json:"scripts_per_job"`
	// Err is the row's failure, empty when it ran.
	Err string `json:"err,omitempty"`
}

// Throughput is one unthrottled drain row in one round.
type Throughput struct {
	// Round numbers the row's repetition, from 1 (0 in files written
	// before rounds: one round).
	Round    int     `json:"round"`
	System   string  `json:"system"`   // sluice | bullmq
	Backend  string  `json:"backend"`  // redis | kafka
	Consumer string  `json:"consumer"` // http | handler | noop
	Workers  int     `json:"workers"`
	Tenants  int     `json:"tenants"`
	Jobs     int     `json:"jobs"`
	Rate     float64 `json:"jobs_per_s"`
	Cmds     float64 `json:"cmds_per_job"`
	Scripts  float64 `json:"scripts_per_job"`
	Err      string  `json:"err,omitempty"`
	Skipped  string  `json:"skipped,omitempty"`
}

// Write stores r as indented JSON at path.
func Write(path string, r *Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("drainresult: encode: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("drainresult: write %s: %w", path, err)
	}
	return nil
}

// Read loads the report at path.
func Read(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("drainresult: read %s: %w", path, err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("drainresult: decode %s: %w", path, err)
	}
	return &r, nil
}
