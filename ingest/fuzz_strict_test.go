package ingest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Field names of a job and of a batch, exactly as documented.
var (
	jobFields   = map[string]bool{"type": true, "payload": true, "id": true, "deadline": true, "cost": true}
	batchFields = map[string]bool{"jobs": true}
)

// strictFinding is why a body is not strict JSON for a submission.
type strictFinding struct {
	// msg says what is wrong; "" when the body is strict (or not a
	// well-formed object at all).
	msg string
	// isName says the finding is an unknown or repeated member name (a 400
	// that must name it), not an empty id (a 422).
	isName bool
	// field is that member's path as a problem names it ("cost",
	// "jobs[3].cost"), and name the member's name.
	field, name string
	// stop says the body is malformed there: nothing after it is read (a
	// json.Decoder's error is sticky while More still peeks).
	stop bool
}

// done says the walk ends at f: a finding or a malformed body.
func (f strictFinding) done() bool { return f.msg != "" || f.stop }

// strictProblem finds the first reason body is not strict JSON for a
// submission: a member name at job or batch level that is not exactly one
// of the documented ones, or is repeated, or an empty id. A payload is
// anything. A body that is not valid JSON has no finding: the server may
// refuse it as malformed before it looks at names.
func strictProblem(body []byte, batch bool) strictFinding {
	if !json.Valid(body) {
		return strictFinding{}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if !batch {
		return strictObject(dec, jobFields, "", nil)
	}
	return strictObject(dec, batchFields, "", func(name string) strictFinding {
		return strictArray(dec, func(i int) strictFinding {
			return strictObject(dec, jobFields, fmt.Sprintf("jobs[%d].", i), nil)
		})
	})
}

// strictObject reads one object from dec and checks its member names
// against allowed; member, when set, reads each member's value instead of
// skipping it.
func strictObject(dec *json.Decoder, allowed map[string]bool, prefix string, member func(string) strictFinding) strictFinding {
	tok, err := dec.Token()
	if d, isDelim := tok.(json.Delim); err != nil || (isDelim && d != '{') {
		return strictFinding{stop: true}
	}
	if tok != json.Delim('{') {
		return strictFinding{} // a scalar: the server refuses it
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return strictFinding{stop: true}
		}
		name, _ := tok.(string)
		switch {
		case !allowed[name]:
			return strictFinding{msg: fmt.Sprintf("unknown field %q", prefix+name), isName: true, field: prefix + name, name: name}
		case seen[name]:
			return strictFinding{msg: fmt.Sprintf("repeated field %q", prefix+name), isName: true, field: prefix + name, name: name}
		}
		seen[name] = true
		if member != nil {
			if f := member(name); f.done() {
				return f
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return strictFinding{stop: true}
		}
		if name == "id" && string(v) == `""` {
			return strictFinding{msg: fmt.Sprintf("empty %q", prefix+name)}
		}
	}
	_, _ = dec.Token() // }
	return strictFinding{}
}

// strictArray reads one array from dec, element i by elem.
func strictArray(dec *json.Decoder, elem func(i int) strictFinding) strictFinding {
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('[') {
		return strictFinding{stop: true}
	}
	for i := 0; dec.More(); i++ {
		if f := elem(i); f.done() {
			return f
		}
	}
	_, _ = dec.Token() // ]
	return strictFinding{}
}
