//go:build !race

package drainer

// raceOn reports whether the tests run under the race detector, which makes
// load tests several times slower.
const raceOn = false
