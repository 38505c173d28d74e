package outflow_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/outflow"
)

// TestCapacityCutSpills: a capacity lowered while the bucket holds water
// (a rate cut, whose default capacity follows it) spills what it leaves
// above the new brim once no caller with the higher capacity has stored
// for 2 s (a change reaches every drainer within 1 s), so the next send
// waits at most those 2 s, not the cut ÷ the new rate (a full bucket cut
// from 1000/s to 10/s waited 99.1 s). Meanwhile no turn is granted ahead.
// The level is what a reader of the stored state (outflow.Limit.At, the
// stats) computes too; a raised capacity spills nothing.
func TestCapacityCutSpills(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "spill")
	b := outflow.NewBucket(rdb)
	fast, slow := outflow.Limit{Rate: 1000, Capacity: 1000}, outflow.Limit{Rate: 10, Capacity: 10}
	take := func(lim outflow.Limit, cost int64, at time.Duration) outflow.Result {
		t.Helper()
		r, err := b.TakeAt(ctx, tenant, lim, cost, t0.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := take(fast, 1000, 0); !r.Allowed {
		t.Fatalf("a full bucket's take: %+v, want allowed", r)
	}
	// The same instant, the rate cut: the spill waits 2 s.
	if r := take(slow, 1, 0); r.Allowed || r.Wait != 2*time.Second || r.Water != 1000 {
		t.Errorf("at the cut: allowed %v, wait %v, water %v; want a wait of 2s (until the spill), water 1000", r.Allowed, r.Wait, r.Water)
	}
	h := rdb.HGetAll(ctx, keys.Water(tenant)).Val()
	st := outflow.State{}
	st.WaterMicro, st.TSMicro, st.CapMicro = num(t, h["water"]), num(t, h["ts"]), num(t, h["cap"])
	at := float64(t0.Add(2 * time.Second).UnixMicro())
	if lv := slow.At(st, at); lv.Water != 0 {
		t.Errorf("Limit.At 2 s after the cut reads water %v, want 0 (spilled to 10, 20 leaked)", lv.Water)
	}
	if r := take(slow, 1, 2*time.Second); !r.Allowed || r.Water != 1 {
		t.Errorf("2 s after the cut: allowed %v, water %v; want allowed, water 1", r.Allowed, r.Water)
	}
	// Raised again: nothing spills.
	if r := take(fast, 999, 2*time.Second); !r.Allowed || r.Water != 1000 {
		t.Errorf("after raising again: allowed %v, water %v; want allowed, water 1000", r.Allowed, r.Water)
	}
}

// TestDisagreeingCapacitiesKeepTheBound: drainers that disagree on the
// capacity (a change reaching them at different times) take in turn, one
// with 1000/s and capacity 1000, one with 10/s and capacity 10, every
// 10 ms for 5 s, each taking single units while it may: the bucket passes
// no more than the higher rate's 5 s plus its capacity. With a spill on every low-capacity take a review measured
// 52,500 units.
func TestDisagreeingCapacitiesKeepTheBound(t *testing.T) {
	rdb := testenv.Redis(t)
	ctx := context.Background()
	tenant := testenv.Name(t, "skew")
	b := outflow.NewBucket(rdb)
	lims := []outflow.Limit{{Rate: 1000, Capacity: 1000}, {Rate: 10, Capacity: 10}}
	var passed int64
	for i := range 500 {
		lim := lims[i%2]
		for range 200 { // each caller takes 1 unit at a time while it may
			r, err := b.TakeAt(ctx, tenant, lim, 1, t0.Add(time.Duration(i)*10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if !r.Allowed {
				break
			}
			passed++
		}
	}
	if bound := int64(1000*5 + 1000); passed > bound {
		t.Errorf("%d units passed in 5 s, want at most %d (rate × 5 s + capacity of the higher config)", passed, bound)
	}
	t.Logf("%d units passed", passed)
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("stored %q: %v", s, err)
	}
	return f
}
