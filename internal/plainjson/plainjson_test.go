package plainjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestCompactMeansMarshalKeepsIt: whenever Compact says yes, json.Marshal
// writes the raw message unchanged; the cases it must refuse are refused.
func TestCompactMeansMarshalKeepsIt(t *testing.T) {
	cases := []struct {
		raw  string
		want bool
	}{
		{`{"to":"ada@example.com","n":[1,2,{"x":null}]}`, true},
		{`"a \" b"`, true},     // a space inside a string, after an escaped quote
		{`"a\\" `, false},      // the string ends before the space
		{`{"a": 1}`, false},    // whitespace outside strings
		{"{\"a\":\n1}", false}, //
		{`{"h":"<b>"}`, false}, // Marshal escapes < and >
		{`{"h":"a&b"}`, false}, // and &
		{"\"\u2028\"", false},  // and U+2028
		{"\"é\"", true},        // other UTF-8 is kept
		{`"\u003c"`, true},     // an escape already written
		{`[true,false,null,-1.5e3]`, true},
	}
	for _, c := range cases {
		if got := Compact([]byte(c.raw)); got != c.want {
			t.Errorf("Compact(%s) = %v, want %v", c.raw, got, c.want)
		}
		out, err := json.Marshal(json.RawMessage(c.raw))
		if err != nil {
			t.Fatalf("Marshal(%s): %v", c.raw, err)
		}
		if Compact([]byte(c.raw)) && !bytes.Equal(out, []byte(c.raw)) {
			t.Errorf("Compact(%s) but Marshal wrote %s", c.raw, out)
		}
	}
}

// TestStringAndTimeAreMarshals: a String or Time value written by hand is
// what json.Marshal writes (refusing more than needed, as non-ASCII, only
// sends a value to json.Marshal).
func TestStringAndTimeAreMarshals(t *testing.T) {
	for _, s := range []string{"acme", "order:17.a-b_c", "", `a"b`, `a\b`, "<", "&", "é", "\x01", "\x7f"} {
		want, _ := json.Marshal(s)
		if String(s) && string(want) != `"`+s+`"` {
			t.Errorf("String(%q) but Marshal wrote %s", s, want)
		}
	}
	now := time.Date(2026, 12, 7, 3, 4, 5, 120000000, time.UTC)
	for _, tm := range []time.Time{now, now.Truncate(time.Second), now.In(time.FixedZone("x", -(5*3600 + 30*60))),
		now.In(time.FixedZone("y", 3*3600+17)), now.In(time.FixedZone("z", 25*3600)), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), {}} {
		want, err := json.Marshal(tm)
		if Time(tm) && (err != nil || string(AppendTime(nil, tm)) != string(want)) {
			t.Errorf("Time(%v) but Marshal wrote %s (%v), AppendTime %s", tm, want, err, AppendTime(nil, tm))
		}
	}
}
