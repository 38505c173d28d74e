package limits

import (
	"errors"
	"math"
	"testing"
)

// TestCheckLeakyReply: the bucket's Go twin refuses every reply the script
// never gives, so a caller backs off instead of trusting, say, a wait of 0.
func TestCheckLeakyReply(t *testing.T) {
	tests := []struct {
		res []int64
		ok  bool
	}{
		{[]int64{1, 0, 3e6, 10000, 3e6}, true},
		{[]int64{0, 100000, 3e6, 10000, 3e6}, true},
		{[]int64{-1, 0, 0, 10000, 3e6}, true},
		{[]int64{0, 0, 3e6, 10000, 3e6}, false},             // must wait, but 0
		{[]int64{0, -5, 3e6, 10000, 3e6}, false},            // negative wait
		{[]int64{0, math.MaxInt64, 3e6, 10000, 3e6}, false}, // overflows a Duration
		{[]int64{0, math.MinInt64, 3e6, 10000, 3e6}, false}, // a Lua overflow
		{[]int64{2, 0, 3e6, 10000, 3e6}, false},             // allowed out of range
		{[]int64{1, 7, 3e6, 10000, 3e6}, false},             // allowed with a wait
		{[]int64{-1, 7, 0, 10000, 3e6}, false},              // never with a wait
		{[]int64{1, 0, math.MinInt64, 10000, 3e6}, false},   // negative water
		{[]int64{1, 0, 3e6, -1, 3e6}, false},                // negative rate
	}
	for _, tc := range tests {
		err := checkLeakyReply(tc.res)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, errLeakyReply)) {
			t.Errorf("checkLeakyReply(%v) = %v, want ok %v (errors wrap errLeakyReply)", tc.res, err, tc.ok)
		}
	}
}
