package tenants

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/config"
)

// ApplyPatch applies a JSON merge patch (RFC 7396) to cur's spec and decodes
// the result strictly, as DecodeSpec does (the patch's own names are checked
// exactly, and none may repeat): members of the patch replace those
// of the spec, objects merge recursively, and null removes a member (so its
// default applies again). The result has no defaults applied.
//
// An outflow's rate and unlimited are one choice, so a patch that sets one
// of them and does not mention the other replaces it: {"outflow":{"rate":5}}
// shapes an unlimited tenant, {"outflow":{"unlimited":true}} lifts a shaped
// tenant's rate, and with it the bucket's capacity and min_rate unless the
// patch sets them (they describe a bucket an unlimited tenant no longer
// has, and would otherwise come back stale with the next rate);
// {"outflow":{"rate":null}} removes the rate, which makes the tenant
// unlimited, and drops them just the same. A patch
// giving both is decoded as it is (and refused when both are set).
//
// A member left at the default derived from another follows that member
// when the patch changes it (followDefaults): burst with the limit,
// capacity and min_rate with the rate.
func ApplyPatch(tenant string, cur config.Tenant, patch []byte) (config.Tenant, error) {
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.UseNumber()
	var p any
	if err := dec.Decode(&p); err != nil {
		return config.Tenant{}, specError(tenant, FieldError{Msg: "patch is not JSON: " + err.Error()})
	}
	if dec.More() {
		return config.Tenant{}, specError(tenant, FieldError{Msg: "patch has more than one JSON value"})
	}
	if err := checkNames(tenant, patch); err != nil {
		return config.Tenant{}, err
	}
	raw, err := EncodeSpec(cur)
	if err != nil {
		return config.Tenant{}, err
	}
	dec = json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return config.Tenant{}, fmt.Errorf("tenants: patch %s: %w", tenant, err)
	}
	followDefaults(doc, p)
	return decodeDoc(tenant, mergePatch(outflowChoice(doc, p), p))
}

// followDefaults removes from doc (the current spec, defaults applied, as
// JSON) each member whose value is the default derived from a member that
// patch p changes, unless p sets that member too, so the default follows
// the new value as config.Load derives it from a file that leaves it out:
// an admission's burst equal to its limit (the tenant's and each job
// type's) when p sets the limit, and an outflow's capacity equal to
// max(1, rate) and min_rate equal to rate ÷ 10 when p sets the rate. The
// stored spec has its defaults filled in, so without this a patch of the
// limit kept the old limit's burst, and a lower rate kept a min_rate above
// it (refused) and the old rate's bucket. A value that differs from its
// default was set on purpose and stays.
func followDefaults(doc, p any) {
	burst := func(limit float64) float64 { return float64(config.DefaultBurst(int64(limit))) }
	follow(doc, p, "admission", "limit", "burst", burst)
	follow(doc, p, "outflow", "rate", "capacity", config.DefaultCapacity)
	follow(doc, p, "outflow", "rate", "min_rate", config.DefaultMinRate)
	pj, _ := objectAt(p, "job_types")
	dj, _ := objectAt(doc, "job_types")
	for typ, pt := range pj {
		if dt, ok := dj[typ]; ok {
			follow(dt, pt, "admission", "limit", "burst", burst)
		}
	}
}

// follow deletes doc[obj][derived] when p[obj] sets src (not null) and not
// derived, and doc's derived is def of doc's src (see followDefaults).
func follow(doc, p any, obj, src, derived string, def func(float64) float64) {
	po, _ := objectAt(p, obj)
	do, ok := objectAt(doc, obj)
	if po == nil || !ok {
		return
	}
	if v, sets := po[src]; !sets || v == nil {
		return
	}
	if _, sets := po[derived]; sets {
		return
	}
	s, ok1 := jsonFloat(do[src])
	d, ok2 := jsonFloat(do[derived])
	if ok1 && ok2 && d == def(s) {
		delete(do, derived)
	}
}

// jsonFloat is a json.Number member's value.
func jsonFloat(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// outflowChoice returns doc without the outflow members that patch p
// replaces by setting the other: "unlimited" when p sets a rate; "rate",
// "capacity" and "min_rate" when p sets unlimited: true; "capacity" and
// "min_rate" when p removes the rate (see ApplyPatch).
func outflowChoice(doc, p any) any {
	po, _ := objectAt(p, "outflow")
	do, ok := objectAt(doc, "outflow")
	if po == nil || !ok {
		return doc
	}
	rate, setsRate := po["rate"]
	unl, setsUnl := po["unlimited"]
	var drop []string
	switch {
	case setsRate && rate != nil && !setsUnl:
		drop = []string{"unlimited"}
	case setsUnl && unl == true && !setsRate:
		drop = []string{"rate", "capacity", "min_rate"}
	case setsRate && rate == nil && !setsUnl:
		drop = []string{"capacity", "min_rate"} // the merge removes the rate
	default:
		return doc
	}
	o := make(map[string]any, len(do))
	for k, v := range do {
		if _, set := po[k]; set || !slices.Contains(drop, k) {
			o[k] = v
		}
	}
	d := make(map[string]any, len(doc.(map[string]any)))
	for k, v := range doc.(map[string]any) {
		d[k] = v
	}
	d["outflow"] = o
	return d
}

// objectAt returns v's member k when v and it are JSON objects.
func objectAt(v any, k string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	o, ok := m[k].(map[string]any)
	return o, ok
}

// mergePatch is RFC 7396 §2 MergePatch(target, patch).
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, _ := target.(map[string]any)
	out := make(map[string]any, len(t)+len(p))
	for k, v := range t {
		out[k] = v
	}
	for k, v := range p {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergePatch(out[k], v)
	}
	return out
}

func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "." + b
}
