package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"
)

var (
	admissionType = reflect.TypeOf(Admission{})
	targetType    = reflect.TypeOf(Target{})
)

// AdmissionHook is the mapstructure decode hook that sees whether an
// admission policy's period is given, which a decoded time.Duration cannot
// tell (0 is also its zero value, which the defaults make 1s). It is
// OutflowHook's sibling and registered in the same two places: Parse (the
// YAML file and SLUICE_* overrides, through viper) and the admin API's spec
// decoder (package tenants). In an admission map a given period of 0 or
// less ("0s", "-1s") is refused as a *FieldError naming "period"; an absent
// (or null) period still defaults to 1s. A period that is not a duration
// string is left to the decoder, which names it.
var AdmissionHook = givenDurationHook(admissionType, "period", "must be >= 1ms (got %v); leave it out for the default 1s")

// TargetHook is AdmissionHook for a target's timeout (a tenant's and a job
// type's): a given timeout of 0 or less is refused as a *FieldError naming
// "timeout", where it would otherwise read as absent and mean the default
// 10s.
var TargetHook = givenDurationHook(targetType, "timeout", "must be above 0 (got %v); leave it out for the default "+DefaultTargetTimeout.String())

// givenDurationHook returns the decode hook that refuses, in a map decoded
// into typ, a given duration field of 0 or less with msg (a format of the
// duration).
func givenDurationHook(typ reflect.Type, field, msg string) func(from, to reflect.Type, data any) (any, error) {
	return func(_, to reflect.Type, data any) (any, error) {
		if to != typ {
			return data, nil
		}
		m, ok := data.(map[string]any)
		if !ok {
			return data, nil
		}
		var d time.Duration
		switch v := m[field].(type) {
		case string:
			p, err := time.ParseDuration(strings.TrimSpace(v))
			if err != nil {
				return data, nil
			}
			d = p
		case time.Duration:
			d = v
		default:
			return data, nil
		}
		if d <= 0 {
			return nil, &FieldError{Field: field, Msg: fmt.Sprintf(msg, d)}
		}
		return data, nil
	}
}
