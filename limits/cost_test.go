package limits

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestAddCost walks AddCost's bounds from both sides: sums up to MaxCost
// pass, one more or any negative or wrapped operand is refused.
func TestAddCost(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a, b int64
		sum  int64
		ok   bool
	}{
		{0, 0, 0, true},
		{1, 2, 3, true},
		{MaxCost - 1, 1, MaxCost, true},
		{MaxCost, 0, MaxCost, true},
		{MaxCost, 1, 0, false},
		{1, MaxCost, 0, false},
		{MaxCost + 1, 0, 0, false},
		{math.MaxInt64, math.MaxInt64, 0, false}, // would wrap to -2
		{math.MaxInt64, 2, 0, false},             // would wrap negative
		{-1, 1, 0, false},
		{1, -1, 0, false},
		{math.MinInt64, math.MinInt64, 0, false},
	}
	for _, c := range cases {
		sum, ok := AddCost(c.a, c.b)
		if sum != c.sum || ok != c.ok {
			t.Errorf("AddCost(%d, %d) = %d, %v; want %d, %v", c.a, c.b, sum, ok, c.sum, c.ok)
		}
	}
}

// TestMicros: the script's µs become a Duration without wrapping.
func TestMicros(t *testing.T) {
	t.Parallel()
	cases := []struct {
		us   int64
		want time.Duration
	}{
		{-1, Never},
		{0, 0},
		{1_500_000, 1500 * time.Millisecond},
		{math.MaxInt64 / 1000, time.Duration(math.MaxInt64/1000) * time.Microsecond},
		{math.MaxInt64/1000 + 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
	}
	for _, c := range cases {
		if got := micros(c.us); got != c.want {
			t.Errorf("micros(%d) = %v, want %v", c.us, got, c.want)
		}
	}
}

// A batch's costs are summed with AddCost, so a sum that would wrap (or pass
// what the admission script can hold) is refused instead.
func ExampleAddCost() {
	var total int64
	for i, cost := range []int64{math.MaxInt64, math.MaxInt64, 3} {
		sum, ok := AddCost(total, cost)
		if !ok {
			fmt.Printf("job %d: the total would exceed %d\n", i, MaxCost)
			return
		}
		total = sum
	}
	fmt.Println("total", total)
	// Output: job 0: the total would exceed 9007199254740991
}
