package limits

import "errors"

// MaxCost is the most units one Request may carry, as its Cost and as each
// of its Costs: 2^53 − 1, the largest integer the admission script's Lua
// doubles hold exactly. A policy admits far less (its Capacity), so a
// request near MaxCost is always refused by some check before the script;
// the bound is there so that no caller's sum, wrapped or not, can reach the
// script as a number it cannot represent.
const MaxCost int64 = MaxExact - 1

// ErrInvalidRequest marks a Request the Admitter refuses before any Redis
// call: a cost outside [0, MaxCost], a negative MaxBacklog, Costs that do not
// match Policies, an invalid tenant or policy. It is the caller's bug or
// configuration, never Redis being unreachable, so a caller must not fail
// open on it.
var ErrInvalidRequest = errors.New("invalid admission request")

// AddCost returns a + b when both are in [0, MaxCost] and so is their sum;
// otherwise ok is false and the sum is not computed, so it never wraps. A
// caller summing the costs of a batch checks every step with it.
func AddCost(a, b int64) (sum int64, ok bool) {
	if a < 0 || b < 0 || a > MaxCost || b > MaxCost-a {
		return 0, false
	}
	return a + b, true
}
