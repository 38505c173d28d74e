package redisq

import (
	"fmt"
	"math/bits"
	"testing"
	"time"
)

// TestProbeSweep: the first probe reads every slice in full; after it one
// slice a turn (probeFullEvery / probeSlices), each slice once per
// probeFullEvery whatever the probes' spacing; a late probe reads every
// slice whose turn passed, and a gap of probeFullEvery or more reads all.
func TestProbeSweep(t *testing.T) {
	const every = probeFullEvery / probeSlices
	all := uint32(1<<probeSlices - 1)
	var s probeSweep
	t0 := time.Unix(1000, 0)
	if got := s.due(t0); got != all {
		t.Fatalf("first probe: slices %b, want all %b", got, all)
	}
	if got := s.due(t0.Add(every / 2)); got != 0 {
		t.Errorf("before the first turn: slices %b, want none", got)
	}
	reads := make([]int, probeSlices)
	now := t0
	for now.Before(t0.Add(2 * probeFullEvery)) { // probes every 300 ms for two periods
		now = now.Add(300 * time.Millisecond)
		got := s.due(now)
		if n := bits.OnesCount32(got); n > 1 {
			t.Errorf("probe at +%v: %d slices (%b), want at most 1 at this spacing", now.Sub(t0), n, got)
		}
		for i := range probeSlices {
			if got&(1<<i) != 0 {
				reads[i]++
			}
		}
	}
	for i, n := range reads {
		if n != 2 {
			t.Errorf("slice %d read in full %d times in two periods, want 2", i, n)
		}
	}
	if got := s.due(now.Add(3 * every)); bits.OnesCount32(got) != 3 {
		t.Errorf("a probe three turns late: slices %b, want 3 of them", got)
	}
	if got := s.due(now.Add(3*every + probeFullEvery)); got != all {
		t.Errorf("after a gap of a whole period: slices %b, want all", got)
	}
}

// TestProbeSliceSpread: 10,000 names fall into the slices within 10 % of
// an even share, so each turn reads about a fifth of the tenants.
func TestProbeSliceSpread(t *testing.T) {
	const n = 10000
	count := make([]int, probeSlices)
	for i := range n {
		count[probeSlice(fmt.Sprintf("bench-t%d", i))]++
	}
	for i, c := range count {
		if share := float64(n) / probeSlices; float64(c) < 0.9*share || float64(c) > 1.1*share {
			t.Errorf("slice %d holds %d of %d names, want %.0f ± 10 %%", i, c, n, share)
		}
	}
}
