package outflow

import (
	"errors"
	"math"
	"testing"

	"github.com/sluicehq/sluice/lua"
)

// ints is a script reply of integers, as go-redis hands it over.
func ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, n := range v {
		out[i] = n
	}
	return out
}

// checkReply fails unless err is nil exactly when ok, and wraps
// lua.ErrReply otherwise.
func checkReply(t *testing.T, what string, reply any, err error, ok bool) {
	t.Helper()
	if (err == nil) != ok || (err != nil && !errors.Is(err, lua.ErrReply)) {
		t.Errorf("%s(%#v) = %v, want ok %v (errors wrap lua.ErrReply)", what, reply, err, ok)
	}
}

// TestParseTake: the bucket's Go twin refuses every reply the script never
// gives, so a caller backs off instead of trusting, say, a wait of 0.
func TestParseTake(t *testing.T) {
	const now = 1796600000000000 // the bucket's clock, unix µs
	tests := []struct {
		res any
		ok  bool
	}{
		{ints(1, 0, 3e6, 10000, 3e6, 0, now), true},
		{ints(1, 0, 3e6, 10000, 3e6, 40000, now), true}, // a turn granted ahead, sent 40 ms later
		{ints(0, 100000, 3e6, 10000, 3e6, 0, now), true},
		{ints(-1, 0, 0, 10000, 3e6, 0, now), true},
		{ints(0, 0, 3e6, 10000, 3e6, 0, now), false},             // must wait, but 0
		{ints(0, -5, 3e6, 10000, 3e6, 0, now), false},            // negative wait
		{ints(0, math.MaxInt64, 3e6, 10000, 3e6, 0, now), false}, // overflows a Duration
		{ints(0, math.MinInt64, 3e6, 10000, 3e6, 0, now), false}, // a Lua overflow
		{ints(2, 0, 3e6, 10000, 3e6, 0, now), false},             // allowed out of range
		{ints(1, 7, 3e6, 10000, 3e6, 0, now), false},             // allowed with a wait
		{ints(-1, 7, 0, 10000, 3e6, 0, now), false},              // never with a wait
		{ints(1, 0, math.MinInt64, 10000, 3e6, 0, now), false},   // negative water
		{ints(1, 0, 3e6, -1, 3e6, 0, now), false},                // negative rate
		{ints(0, 100000, 3e6, 10000, 3e6, 5, now), false},        // a delay with a wait
		{ints(-1, 0, 0, 10000, 3e6, 5, now), false},              // a delay with never
		{ints(1, 0, 3e6, 10000, 3e6, -1, now), false},            // negative delay
		{ints(1, 0, 3e6, 10000, 3e6, 10000001, now), false},      // past MaxAhead
		{ints(1, 0, 3e6, 10000, 3e6, 0), false},                  // six values: no clock
		{ints(1, 0, 3e6, 10000, 3e6, 0, 0), false},               // a clock at the epoch
		{ints(1, 0, 3e6, 10000, 3e6, 0, -1), false},              // a clock before it
		{[]any{int64(1), "0", int64(3e6), int64(1e4), int64(3e6), int64(0), int64(now)}, false},
		{"OK", false},
		{nil, false},
	}
	for _, tc := range tests {
		_, err := parseTake(tc.res)
		checkReply(t, "parseTake", tc.res, err, tc.ok)
	}
}

func TestParseDecrease(t *testing.T) {
	for _, tc := range []struct {
		res any
		ok  bool
	}{
		{ints(50000, 1), true},
		{ints(50000, 0), true},
		{ints(50000, 2), false},
		{ints(-1, 1), false},
		{ints(50000), false},
		{[]any{"50000", int64(1)}, false},
		{int64(1), false},
	} {
		_, err := parseDecrease(tc.res)
		checkReply(t, "parseDecrease", tc.res, err, tc.ok)
	}
}

func TestParseSemaphoreReplies(t *testing.T) {
	for _, tc := range []struct {
		res any
		ok  bool
	}{
		{ints(1, 0), true},
		{ints(0, 1), true},
		{ints(0, 0), false}, // a wait below 1 ms
		{ints(1, 5), false},
		{ints(2, 0), false},
		{ints(0, math.MaxInt64), false},
		{ints(1), false},
		{[]any{int64(1), nil}, false},
		{"1", false},
	} {
		_, _, err := parseAcquire(tc.res)
		checkReply(t, "parseAcquire", tc.res, err, tc.ok)
	}
	for _, tc := range []struct {
		res any
		ok  bool
	}{
		{int64(1), true},
		{int64(0), true},
		{int64(2), false},
		{"1", false},
		{ints(1), false},
	} {
		checkReply(t, "parseRelease", tc.res, parseRelease(tc.res), tc.ok)
	}
}

func TestParseExtend(t *testing.T) {
	for _, tc := range []struct {
		res any
		ok  bool
	}{
		{[]any{}, true},
		{[]any{"1|a", "2|b"}, true},
		{[]any{"1|a", int64(2)}, false},
		{int64(0), false},
		{"1|a", false},
	} {
		_, err := ParseExtend(tc.res)
		checkReply(t, "ParseExtend", tc.res, err, tc.ok)
	}
}
