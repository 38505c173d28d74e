package drainer

import (
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/config"
)

// Backoff is exponential backoff with full jitter: the delay before retry n
// (n >= 1, the number of attempts made so far) is uniform in
// [0, min(Max, Base × 2^(n−1))]. Full jitter spreads the retries of many
// jobs that failed together, so they do not hit a recovering downstream in
// one wave.
type Backoff struct {
	// Base is the cap of the first retry's delay (default
	// config.DefaultBackoffBase, 500ms).
	Base time.Duration
	// Max caps every delay (default config.DefaultBackoffMax, 5m).
	Max time.Duration
}

// Delay returns the delay before the retry that follows attempt n, drawing
// the jitter from r (0 <= r < 1; pass rand.Float64()).
func (b Backoff) Delay(n int, r float64) time.Duration {
	base, ceil := b.Base, b.Max
	if base <= 0 {
		base = config.DefaultBackoffBase
	}
	if ceil <= 0 {
		ceil = config.DefaultBackoffMax
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

// errorBackoff is the pause of a loop whose backend call keeps failing:
// errorPause after the first failure, doubling up to errorPauseMax, each
// drawn uniformly from [pause/2, pause] so the lanes that failed together
// do not retry in one wave. A success resets it. A lane never retries a
// failed call without this pause, so a backend that answers every call
// with an error (down, or a stored value a script refuses) costs each lane
// at most one call per errorPauseMax/2 once the pause is capped. Not safe
// for concurrent use; each loop has its own.
type errorBackoff struct{ failures int }

// errorPauses is the doubling of errorBackoff: Backoff's, from errorPause
// to errorPauseMax.
var errorPauses = Backoff{Base: errorPause, Max: errorPauseMax}

// next returns the pause before the next retry: the failure's Backoff
// delay with its jitter drawn from [1/2, 1] instead of [0, 1].
func (b *errorBackoff) next() time.Duration {
	b.failures++
	return errorPauses.Delay(b.failures, 0.5+rand.Float64()/2)
}

// reset starts the next run of failures at errorPause again.
func (b *errorBackoff) reset() { b.failures = 0 }
