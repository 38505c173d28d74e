package drainer

import (
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with full jitter: the delay before retry n
// (n >= 1, the number of attempts made so far) is uniform in
// [0, min(Max, Base × 2^(n−1))]. Full jitter spreads the retries of many
// jobs that failed together, so they do not hit a recovering downstream in
// one wave.
type Backoff struct {
	// Base is the cap of the first retry's delay (default 500ms).
	Base time.Duration
	// Max caps every delay (default 5m).
	Max time.Duration
}

// Delay returns the delay before the retry that follows attempt n, drawing
// the jitter from r (0 <= r < 1; pass rand.Float64()).
func (b Backoff) Delay(n int, r float64) time.Duration {
	base, ceil := b.Base, b.Max
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if ceil <= 0 {
		ceil = 5 * time.Minute
	}
	c := base
	for i := 1; i < n && c < ceil; i++ {
		c *= 2
	}
	c = min(c, ceil)
	return time.Duration(r * float64(c))
}

// next is Delay with a random jitter.
func (b Backoff) next(n int) time.Duration { return b.Delay(n, rand.Float64()) }
