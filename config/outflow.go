package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// The outflow rate's rules live here: a tenant's outflow is either shaped,
// Rate units per second with MinOutflowRate <= Rate <= MaxOutflowRate and a
// bucket of 1 to MaxOutflowCapacity units, or spelled out as unlimited
// (outflow.unlimited: true), which has no bucket: no capacity or min_rate. A rate of 0 never means unlimited:
// it is refused wherever it is written (the YAML file, a SLUICE_*
// override, an admin PUT or PATCH, sluicectl --rate 0), with StopHint.

// MaxOutflowRate is the largest outflow.rate, in units per second across all
// drainers (1,000,000). Above it, set outflow.unlimited instead.
const MaxOutflowRate = 1_000_000

// MinOutflowRate is the smallest outflow.rate, in units per second (0.001:
// one unit every 1,000 s). The bucket script reports the rate it used in
// milli-units per second, which is 0 below it, and a slower rate is more
// likely a typo (or a wish to stop delivery) than a plan.
const MinOutflowRate = 0.001

// MaxOutflowCapacity is the largest outflow.capacity, in units
// (1,000,000,000). The bucket script keeps its water in micro-units in Lua
// doubles and refuses a capacity with capacity × 10^6 >= 2^53 (about
// 9.007e9); 1e9 stays well inside that and is MaxMaxJobCost, so a job of any
// cost ingest.max_job_cost can allow fits in some bucket.
const MaxOutflowCapacity = 1_000_000_000

// MaxConcurrency is the largest outflow.concurrency (jobs in flight across
// all drainers): the semaphore of semaphore_acquire.lua holds one sorted-set
// member per slot taken.
const MaxConcurrency = 1_000_000

// StopHint is what every refusal of an outflow rate says to do instead:
// pausing (Outflow.Paused), which a rate of 0 never means.
const StopHint = `to stop delivery, pause the tenant: set outflow.paused: true (PATCH /admin/v1/tenants/{id} {"outflow":{"paused":true}}, or sluicectl pause TENANT); for no limit set outflow.unlimited: true and leave out the rate`

// Shaped reports whether o limits the tenant's delivery to Rate units per
// second: Unlimited is false and Rate is set. Every reader of an outflow
// (drainers, the backlog gate's Retry-After, the stats API, the runtime
// override writes) asks this rather than testing Rate itself. A validated
// outflow has Rate > 0 exactly when it is not Unlimited; an unvalidated one
// with Rate 0 is not shaped, which is what the defaults make it (Unlimited).
func (o Outflow) Shaped() bool { return !o.Unlimited && o.Rate > 0 }

// rateProblem states what is wrong with an outflow rate that is given, ""
// when it is fine: a finite number in [MinOutflowRate, MaxOutflowRate].
func rateProblem(r float64) string {
	switch {
	case math.IsNaN(r) || math.IsInf(r, 0):
		return fmt.Sprintf("must be a finite number of units per second (got %g); %s", r, StopHint)
	case r <= 0:
		return fmt.Sprintf("must be > 0 units per second (got %g); %s", r, StopHint)
	case r < MinOutflowRate:
		return fmt.Sprintf("must be >= %g units per second, one unit every %g s (got %g); %s", float64(MinOutflowRate), 1/MinOutflowRate, r, StopHint)
	case r > MaxOutflowRate:
		return fmt.Sprintf("must be <= %d units per second (got %g); for no limit set outflow.unlimited: true and leave out the rate", MaxOutflowRate, r)
	}
	return ""
}

// capacityProblem states what is wrong with an outflow capacity after the
// defaults, "" when it is fine: a finite number, 0 (no bucket: an unlimited
// outflow) or, when shaped, in [1, MaxOutflowCapacity].
func capacityProblem(c float64, shaped bool) string {
	switch {
	case math.IsNaN(c) || math.IsInf(c, 0):
		return fmt.Sprintf("must be a finite number of units (got %g)", c)
	case c < 0:
		return fmt.Sprintf("must be >= 0 (got %g)", c)
	case shaped && c < 1:
		return fmt.Sprintf("must be >= 1 so a job of cost 1 can ever go (got %g)", c)
	case c > MaxOutflowCapacity:
		return fmt.Sprintf("must be <= %d units, the most the outflow bucket holds exactly (got %g)", MaxOutflowCapacity, c)
	}
	return ""
}

// minRateProblem states what is wrong with an outflow min_rate after the
// defaults, "" when it is fine: a finite number in [0, rate] (any finite
// number >= 0 for an unlimited outflow, whose defaults make it 0).
func minRateProblem(m, rate float64, shaped bool) string {
	if math.IsNaN(m) || math.IsInf(m, 0) || m < 0 || (shaped && m > rate) {
		if shaped {
			return fmt.Sprintf("must be between 0 and rate %g units per second (got %g)", rate, m)
		}
		return fmt.Sprintf("must be between 0 and rate (got %g)", m)
	}
	return ""
}

// FieldError is a problem that a decode hook of this package found in one
// field below the value it decodes: Field is relative to it ("rate" of an
// outflow). config.Parse and the tenant spec decoder (package tenants) add
// the path of the decoded value to it.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

var outflowType = reflect.TypeOf(Outflow{})

// OutflowHook is the mapstructure decode hook that sees which outflow fields
// are given, which a decoded float64 cannot tell (0 is also its zero value).
// Both decoders of a tenant use it: Parse (the YAML file and SLUICE_*
// overrides, through viper) and the admin API's spec decoder. In an outflow
// map:
//
//   - a given rate must be a finite number in [MinOutflowRate,
//     MaxOutflowRate];
//   - unlimited: true excludes a rate, and unlimited: false needs one;
//   - neither given (or no outflow at all) is unlimited: the defaults set
//     Unlimited.
//
// A problem is a *FieldError naming "rate" or "unlimited". A value of the
// wrong type is left to the decoder, which names it.
func OutflowHook(from, to reflect.Type, data any) (any, error) {
	if to != outflowType {
		return data, nil
	}
	m, ok := data.(map[string]any)
	if !ok {
		return data, nil
	}
	rate, hasRate := m["rate"]
	hasRate = hasRate && rate != nil
	if hasRate {
		if r, ok := number(rate); ok {
			if msg := rateProblem(r); msg != "" {
				return nil, &FieldError{Field: "rate", Msg: msg}
			}
		}
	}
	if v, given := m["unlimited"]; given && v != nil {
		u, ok := boolean(v)
		switch {
		case ok && u && hasRate:
			return nil, &FieldError{Field: "unlimited", Msg: fmt.Sprintf("true excludes a rate (got rate %v); leave out one of them", rate)}
		case ok && !u && !hasRate:
			return nil, &FieldError{Field: "unlimited", Msg: "false needs a rate, in units per second > 0; for no limit set unlimited: true"}
		}
	}
	return data, nil
}

// number reads a number as the decoders hand it over: a Go number (YAML),
// a json.Number (the admin API) or a string (a SLUICE_* override).
func number(v any) (float64, bool) {
	s := ""
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case json.Number:
		s = n.String()
	case string:
		s = strings.TrimSpace(n)
	default:
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true // out of range: ±Inf, refused as not finite
}

func boolean(v any) (bool, bool) {
	switch b := v.(type) {
	case bool:
		return b, true
	case string:
		u, err := strconv.ParseBool(strings.TrimSpace(b))
		return u, err == nil
	}
	return false, false
}
