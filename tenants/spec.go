package tenants

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/strictjson"
)

// A tenant spec is the JSON form of a config.Tenant, with the same field
// names as a tenant in the YAML configuration (the mapstructure tags of
// package config) and durations as Go duration strings ("1s", "250ms"):
//
//	{"api_keys": ["sha256:…"],
//	 "admission": {"algorithm": "gcra", "limit": 10, "period": "1s", "burst": 5},
//	 "job_types": {"encode": {"admission": {…}, "target": {…}}},
//	 "outflow": {"rate": 5, "capacity": 5, "max_backlog": 10000, "concurrency": 0,
//	             "adaptive": true, "min_rate": 0.5},   (or {"unlimited": true, …})
//	 "target": {"url": "http://…", "timeout": "10s"},
//	 "on_limiter_error": "allow"}
//
// Deriving both directions from the config structs keeps the spec and the
// YAML one shape: a field added to config.Tenant appears in the spec too.

// EncodeSpec returns t as spec JSON. Every field is written except a policy
// or target whose fields are all zero, an empty job_types map, a zero
// duration (the default applies) and a zero field tagged omitempty (an unlimited outflow is {"unlimited": true}
// without a rate, a shaped one has no "unlimited"), so the output decodes
// back to t.
func EncodeSpec(t config.Tenant) ([]byte, error) {
	v, _ := specValue(reflect.ValueOf(t))
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("tenants: encode spec: %w", err)
	}
	return b, nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// specValue converts v to a JSON-ready value; zero reports that v should be
// left out of its parent (an all-zero struct, an empty map, a nil pointer).
func specValue(v reflect.Value) (out any, zero bool) {
	if v.Type() == durationType {
		d := time.Duration(v.Int())
		return d.String(), d == 0
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil, true
		}
		out, _ := specValue(v.Elem())
		return out, false
	case reflect.Struct:
		m := map[string]any{}
		allZero := true
		for i := range v.NumField() {
			name, opts, _ := strings.Cut(v.Type().Field(i).Tag.Get("mapstructure"), ",")
			if name == "" || name == "-" {
				continue
			}
			fv, fz := specValue(v.Field(i))
			// A zero duration is left out too: it means "the default" (1s
			// for a period), and a period spelled "0s" is refused on the
			// way in (config.AdmissionHook).
			if fz && (opts == "omitempty" || v.Field(i).Type() == durationType) {
				continue
			}
			allZero = allZero && fz
			k := v.Field(i).Kind()
			if fz && (k == reflect.Struct || k == reflect.Map || k == reflect.Pointer) {
				continue
			}
			m[name] = fv
		}
		return m, allZero
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for _, k := range v.MapKeys() {
			m[k.String()], _ = specValue(v.MapIndex(k))
		}
		return m, v.Len() == 0
	case reflect.Slice:
		s := make([]any, v.Len())
		for i := range s {
			s[i], _ = specValue(v.Index(i))
		}
		return s, v.Len() == 0
	}
	return v.Interface(), v.IsZero()
}

// FieldError is one problem with a field of a tenant spec.
type FieldError struct {
	// Field is the field's path in the spec, e.g. "outflow.rate" or
	// "job_types.encode.admission.limit" ("" for the spec as a whole); for
	// a problem outside the spec (another tenant's key clashing with this
	// one's) it is the full configuration key.
	Field string
	// Key is the full configuration key, as config.Validate names it:
	// "tenants.acme.outflow.rate".
	Key string
	// Msg says what is wrong, e.g. "must be >= 1 (got 0)".
	Msg string
}

func (e FieldError) Error() string { return e.Key + ": " + e.Msg }

// SpecError lists every problem found in a tenant spec. The admin API
// answers it with 422 naming the first field.
type SpecError struct {
	// Tenant is the spec's tenant id.
	Tenant string
	// Problems has at least one entry: the spec's own first, each by field.
	Problems []FieldError
}

func (e *SpecError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Error()
	}
	return strings.Join(parts, "; ")
}

// specError returns a SpecError of problems found in the spec itself.
func specError(tenant string, problems ...FieldError) *SpecError {
	for i := range problems {
		problems[i].Key = joinPath("tenants."+tenant, problems[i].Field)
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Field < problems[j].Field })
	return &SpecError{Tenant: tenant, Problems: problems}
}

// DecodeSpec decodes spec JSON into a config.Tenant, strictly: unknown
// fields (names are exact: "Outflow" is an unknown field), a field given
// twice in one object, wrong types, fractional integers and durations
// without a unit are a *SpecError naming the field. Defaults are not
// applied and values are not validated (see Validate).
func DecodeSpec(tenant string, raw []byte) (config.Tenant, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return config.Tenant{}, specError(tenant, FieldError{Msg: "not JSON: " + err.Error()})
	}
	if dec.More() {
		return config.Tenant{}, specError(tenant, FieldError{Msg: "more than one JSON value"})
	}
	if err := checkNames(tenant, raw); err != nil {
		return config.Tenant{}, err
	}
	return decodeDoc(tenant, doc)
}

// checkNames refuses, with strictjson, a key of spec (or patch) JSON that
// is not exactly a field name of config.Tenant's mapstructure tags, and a
// key given twice in one object: mapstructure would match the first
// regardless of case, and a generic decode keeps the last of repeats.
func checkNames(tenant string, raw []byte) error {
	err := strictjson.Check(raw, config.Tenant{}, "mapstructure")
	var fe *strictjson.Error
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &fe):
		return specError(tenant, FieldError{Msg: "not JSON: " + err.Error()})
	case fe.Kind == strictjson.Repeated:
		return specError(tenant, FieldError{Field: fe.Path, Msg: "given more than once"})
	}
	return specError(tenant, FieldError{Field: fe.Path, Msg: "unknown field"})
}

// decodeDoc decodes a generic JSON document (numbers as json.Number).
func decodeDoc(tenant string, doc any) (config.Tenant, error) {
	if _, ok := doc.(map[string]any); !ok {
		return config.Tenant{}, specError(tenant, FieldError{Msg: "must be a JSON object"})
	}
	var t config.Tenant
	d, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		DecodeHook:  mapstructure.ComposeDecodeHookFunc(durationHook, config.OutflowHook, config.AdmissionHook, config.TargetHook),
		ErrorUnused: true,
		Result:      &t,
		TagName:     "mapstructure",
	})
	if err != nil {
		return config.Tenant{}, fmt.Errorf("tenants: decode spec: %w", err)
	}
	if err := d.Decode(doc); err != nil {
		return config.Tenant{}, specError(tenant, decodeProblems(err)...)
	}
	return t, nil
}

// durationHook reads a duration from a string with a unit only; a bare
// number is refused (it would be nanoseconds), as the YAML loader does.
func durationHook(from, to reflect.Type, data any) (any, error) {
	if to != durationType {
		return data, nil
	}
	s, ok := data.(string)
	if !ok {
		return nil, fmt.Errorf("a duration is a string with a unit, e.g. \"1s\" or \"250ms\" (got %v)", data)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, fmt.Errorf("not a duration: %q", s)
	}
	return d, nil
}

// decodeProblems turns mapstructure's errors into field problems with
// dotted paths ("job_types.encode.admission.limit").
func decodeProblems(err error) []FieldError {
	var out []FieldError
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var de *mapstructure.DecodeError
		if !errors.As(err, &de) {
			out = append(out, FieldError{Msg: err.Error()})
			return
		}
		field := specPath(de.Name())
		msg := de.Unwrap().Error()
		var fe *config.FieldError
		if errors.As(de.Unwrap(), &fe) {
			out = append(out, FieldError{Field: joinPath(field, fe.Field), Msg: fe.Msg})
			return
		}
		if keys, ok := strings.CutPrefix(msg, "has invalid keys: "); ok {
			for _, k := range strings.Split(keys, ", ") {
				out = append(out, FieldError{Field: joinPath(field, k), Msg: "unknown field"})
			}
			return
		}
		out = append(out, FieldError{Field: field, Msg: msg})
	}
	walk(err)
	return out
}

// specPath turns mapstructure's "job_types[encode].admission" into
// "job_types.encode.admission", the form config.Validate uses; list indexes
// keep their brackets ("api_keys[0]").
func specPath(name string) string {
	var b strings.Builder
	for {
		open := strings.IndexByte(name, '[')
		if open < 0 {
			b.WriteString(name)
			return b.String()
		}
		end := strings.IndexByte(name[open:], ']')
		if end < 0 {
			b.WriteString(name)
			return b.String()
		}
		key := name[open+1 : open+end]
		b.WriteString(name[:open])
		if _, err := strconv.Atoi(key); err == nil {
			b.WriteString("[" + key + "]")
		} else {
			b.WriteString("." + key)
		}
		name = name[open+end+1:]
	}
}
