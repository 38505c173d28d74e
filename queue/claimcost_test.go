package queue

import (
	"math"
	"testing"

	"github.com/sluicehq/sluice/limits"
)

// TestClaimCost: a claimed job's cost is its envelope's within [1,
// limits.MaxCost].
func TestClaimCost(t *testing.T) {
	for _, c := range []struct{ in, want int64 }{
		{math.MinInt64, 1}, {-1, 1}, {0, 1}, {1, 1}, {7, 7},
		{limits.MaxCost, limits.MaxCost}, {limits.MaxCost + 1, limits.MaxCost}, {math.MaxInt64, limits.MaxCost},
	} {
		if got := ClaimCost(c.in); got != c.want {
			t.Errorf("ClaimCost(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}
