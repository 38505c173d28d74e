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
// above the new brim, so the next send waits one drip at the new rate, not
// the cut ÷ the new rate (a full bucket cut from 1000/s to 10/s waited
// 99.1 s). The spilled level is what a reader of the stored state
// (outflow.Limit.At, the stats) computes too; a raised capacity spills
// nothing, and a stored level of the same capacity is untouched.
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
	// The same instant, the rate cut: the water (1000) spills to 10.
	if r := take(slow, 1, 0); r.Allowed || r.Wait != 100*time.Millisecond || r.Water != 10 {
		t.Errorf("after the cut: allowed %v, wait %v, water %v; want a wait of 100ms (one drip at 10/s), water 10", r.Allowed, r.Wait, r.Water)
	}
	h := rdb.HGetAll(ctx, keys.Water(tenant)).Val()
	st := outflow.State{}
	st.WaterMicro, st.TSMicro, st.CapMicro = num(t, h["water"]), num(t, h["ts"]), num(t, h["cap"])
	if lv := slow.At(st, float64(t0.UnixMicro())); lv.Water != 10 {
		t.Errorf("Limit.At after the cut reads water %v, want 10 (the script's level)", lv.Water)
	}
	if r := take(slow, 1, 100*time.Millisecond); !r.Allowed || r.Water != 10 {
		t.Errorf("one drip later: allowed %v, water %v; want allowed, water 10", r.Allowed, r.Water)
	}
	// Raised again: nothing spills, the level stays as stored (10 of 1000).
	if r := take(fast, 1, 100*time.Millisecond); !r.Allowed || r.Water != 11 {
		t.Errorf("after raising again: allowed %v, water %v; want allowed, water 11", r.Allowed, r.Water)
	}
	if r := take(fast, 989, 100*time.Millisecond); !r.Allowed || r.Water != 1000 {
		t.Errorf("filling the raised bucket: allowed %v, water %v; want allowed, water 1000", r.Allowed, r.Water)
	}
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("stored %q: %v", s, err)
	}
	return f
}
