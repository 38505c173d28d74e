package outflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/outflow"
)

// TestBucketTakeAheadGrantsATurnDueSoon: at 10/s with capacity 1, after a
// turn taken now the next falls due in 100 ms. TakeAhead with 150 ms grants
// it at once with a Delay of about 100 ms and its cost in the water, so the
// ask after it, with or without ahead, waits about 200 ms (two turns
// spent); an ahead past MaxAhead or below 0 is refused before any call.
func TestBucketTakeAheadGrantsATurnDueSoon(t *testing.T) {
	ctx := context.Background()
	l := outflow.NewBucket(testenv.Redis(t))
	tenant := testenv.Name(t, "ahead")
	lim := outflow.Limit{Rate: 10, Capacity: 1}
	if r, err := l.TakeAhead(ctx, tenant, lim, 1, 150*time.Millisecond); err != nil || !r.Allowed || r.Delay != 0 {
		t.Fatalf("first ask: %+v, %v; want allowed now", r, err)
	}
	r, err := l.TakeAhead(ctx, tenant, lim, 1, 150*time.Millisecond)
	if err != nil || !r.Allowed || r.Delay < 80*time.Millisecond || r.Delay > 100*time.Millisecond || r.Water < 1.8 || r.Water > 2 {
		t.Fatalf("second ask: %+v, %v; want allowed with a delay of about 100 ms and water about 2", r, err)
	}
	for _, ahead := range []time.Duration{150 * time.Millisecond, 0} {
		r, err := l.TakeAhead(ctx, tenant, lim, 1, ahead)
		if err != nil || r.Allowed || r.Delay != 0 || r.Wait < 150*time.Millisecond || r.Wait > 200*time.Millisecond {
			t.Errorf("ask with ahead %v: %+v, %v; want a wait of about 200 ms and no delay", ahead, r, err)
		}
	}
	for _, ahead := range []time.Duration{-time.Millisecond, outflow.MaxAhead + time.Microsecond} {
		if _, err := l.TakeAhead(ctx, tenant, lim, 1, ahead); err == nil {
			t.Errorf("ahead %v: no error, want one", ahead)
		}
	}
}
