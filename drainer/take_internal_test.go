package drainer

import (
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// TestTurnAhead: three turns' time, at least 100 ms and at most
// queue.TurnAheadMax, whatever the rate.
func TestTurnAhead(t *testing.T) {
	for _, c := range []struct {
		rate float64
		want time.Duration
	}{
		{1000, 100 * time.Millisecond}, {30, 100 * time.Millisecond}, {10, 300 * time.Millisecond},
		{5, 600 * time.Millisecond}, {1, queue.TurnAheadMax}, {0.001, queue.TurnAheadMax}, {1e-15, queue.TurnAheadMax},
		{math.Inf(1), 100 * time.Millisecond}, {math.NaN(), 100 * time.Millisecond},
	} {
		if got := turnAhead(c.rate); got != c.want {
			t.Errorf("turnAhead(%v) = %v, want %v", c.rate, got, c.want)
		}
	}
}
