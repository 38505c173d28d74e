package main

import (
	"math"
	"sort"
	"time"
)

// accuracy is what an accuracy row measured.
//
// The steady window is [from, from + duration), from chosen by the row
// (see bench.accuracyWindow); the initial burst of a fresh bucket falls
// before it and is left out of the rate and the jitter, not of MaxWindow.
type accuracy struct {
	// Warmup is from the first arrival to the steady window.
	Warmup time.Duration
	// Jobs is the number of arrivals in the steady window.
	Jobs int
	// Rate is the achieved rate: the least-squares slope of the arrival
	// index over the arrival time in the steady window, in jobs/s. Unlike
	// jobs ÷ window it does not depend on where the window's edges cut a
	// burst (BullMQ's fixed window releases max jobs at once).
	Rate float64
	// ErrPct is (Rate − target) ÷ target × 100.
	ErrPct float64
	// MaxWindow is the most arrivals in any 1-s sliding window [t, t+1s)
	// over the whole row, warm-up and initial burst included.
	MaxWindow int
	// MaxAt is where MaxWindow's window starts, from the first arrival.
	MaxAt time.Duration
	// MaxSent is the same by send time (Sluice-Sent-At, the worker's clock
	// when the job left it): what the throttle let go, before the spread of
	// the delivery latency. 0 when an arrival had no send time.
	MaxSent int
	// MaxSteady is the same within the steady window.
	MaxSteady int
	// BurstSpread is from the first arrival to the capacity-th: how long
	// the start-up burst took to reach the sink (0 with fewer arrivals).
	BurstSpread time.Duration
	// GapMean, GapSD and GapP99 describe the gaps between consecutive
	// arrivals in the steady window (ideal: every gap 1/target, SD 0).
	GapMean, GapSD, GapP99 time.Duration
	// SentGapSD is GapSD of the same jobs by send time (Sluice-Sent-At):
	// the inter-dispatch gaps, before the delivery latency's jitter. 0 when
	// a job had no send time.
	SentGapSD time.Duration
	// Dups counts arrivals of a job id that had already arrived.
	Dups int
}

// measureAccuracy computes an accuracy row from arrivals sorted by time,
// with the steady window [from, from + duration).
func measureAccuracy(arr []arrival, from time.Time, duration time.Duration, target, capacity float64) accuracy {
	var a accuracy
	if len(arr) == 0 {
		return a
	}
	a.Dups = duplicates(arr)
	var at int
	a.MaxWindow, at = maxInWindowAt(arr, time.Second)
	a.MaxAt = arr[at].at.Sub(arr[0].at)
	a.MaxSent = maxSent(arr)
	if c := int(capacity); c >= 1 && c <= len(arr) {
		a.BurstSpread = arr[c-1].at.Sub(arr[0].at)
	}
	a.Warmup = from.Sub(arr[0].at)
	to := from.Add(duration)
	lo := sort.Search(len(arr), func(i int) bool { return !arr[i].at.Before(from) })
	hi := sort.Search(len(arr), func(i int) bool { return !arr[i].at.Before(to) })
	win := arr[lo:hi]
	a.Jobs = len(win)
	a.MaxSteady = maxInWindow(win, time.Second)
	if len(win) < 2 {
		return a
	}
	a.Rate = slope(win)
	a.ErrPct = (a.Rate - target) / target * 100
	times := make([]time.Time, len(win))
	for i, x := range win {
		times[i] = x.at
	}
	a.GapMean, a.GapSD, a.GapP99 = gapStats(times)
	if sent, ok := sentTimes(win); ok {
		_, a.SentGapSD, _ = gapStats(sent)
	}
	return a
}

// gapStats is the mean, SD and p99 of the gaps between consecutive times
// of ts (sorted, at least 2).
func gapStats(ts []time.Time) (mean, sd, p99 time.Duration) {
	gaps := make([]float64, len(ts)-1)
	var sum float64
	for i := 1; i < len(ts); i++ {
		gaps[i-1] = float64(ts[i].Sub(ts[i-1]))
		sum += gaps[i-1]
	}
	m := sum / float64(len(gaps))
	var sq float64
	for _, g := range gaps {
		sq += (g - m) * (g - m)
	}
	sort.Float64s(gaps)
	return time.Duration(m), time.Duration(math.Sqrt(sq / float64(len(gaps)))), time.Duration(percentile(gaps, 0.99))
}

// slope is the least-squares slope of i over arr[i].at, in per second.
func slope(arr []arrival) float64 {
	n := float64(len(arr))
	t0 := arr[0].at
	var st, si float64
	for i, x := range arr {
		st += x.at.Sub(t0).Seconds()
		si += float64(i)
	}
	mt, mi := st/n, si/n
	var cov, vt float64
	for i, x := range arr {
		dt := x.at.Sub(t0).Seconds() - mt
		cov += dt * (float64(i) - mi)
		vt += dt * dt
	}
	if vt == 0 {
		return math.Inf(1)
	}
	return cov / vt
}

// maxInWindow is the most arrivals in any window [arr[i].at, +w).
func maxInWindow(arr []arrival, w time.Duration) int {
	n, _ := maxInWindowAt(arr, w)
	return n
}

// maxInWindowAt is maxInWindow and the index i of the first such window.
func maxInWindowAt(arr []arrival, w time.Duration) (best, at int) {
	j := 0
	for i := range arr {
		for j < len(arr) && arr[j].at.Sub(arr[i].at) < w {
			j++
		}
		if j-i > best {
			best, at = j-i, i
		}
	}
	return best, at
}

// maxSent is the most arrivals sent in any 1-s window [t, t+1s), by their
// send times; 0 when one has none.
func maxSent(arr []arrival) int {
	sent, ok := sentTimes(arr)
	if !ok {
		return 0
	}
	bySent := make([]arrival, len(sent))
	for i, t := range sent {
		bySent[i] = arrival{at: t}
	}
	return maxInWindow(bySent, time.Second)
}

// sentTimes is the send times of arr, sorted; false when one has none.
func sentTimes(arr []arrival) ([]time.Time, bool) {
	out := make([]time.Time, len(arr))
	for i, a := range arr {
		if a.sent.IsZero() {
			return nil, false
		}
		out[i] = a.sent
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out, true
}

// duplicates counts arrivals whose id arrived before.
func duplicates(arr []arrival) int {
	seen := make(map[string]struct{}, len(arr))
	n := 0
	for _, a := range arr {
		if _, ok := seen[a.id]; ok {
			n++
			continue
		}
		seen[a.id] = struct{}{}
	}
	return n
}

// percentile returns the p-quantile (nearest rank) of sorted values.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// throughput is what a throughput row measured.
type throughput struct {
	// Jobs is the number of arrivals, duplicates included.
	Jobs int
	// Dups counts arrivals of an id that had already arrived.
	Dups int
	// Elapsed is from the first arrival to the last.
	Elapsed time.Duration
	// Rate is (Jobs − 1) ÷ Elapsed, jobs/s: the drain rate once started,
	// independent of process start-up.
	Rate float64
}

// measureThroughput computes a throughput row from arrivals sorted by time.
func measureThroughput(arr []arrival) throughput {
	t := throughput{Jobs: len(arr), Dups: duplicates(arr)}
	if len(arr) < 2 {
		return t
	}
	t.Elapsed = arr[len(arr)-1].at.Sub(arr[0].at)
	if t.Elapsed > 0 {
		t.Rate = float64(len(arr)-1) / t.Elapsed.Seconds()
	}
	return t
}
