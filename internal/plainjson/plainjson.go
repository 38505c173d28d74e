// Package plainjson tells when a value's JSON can be written by hand, byte
// for byte what encoding/json would write, without escaping or checks: the
// hot paths (an ingest answer, a job's envelope) write those by hand and
// leave every other value to json.Marshal.
package plainjson

import "time"

// String reports whether s is a JSON string's body as it stands: printable
// ASCII that encoding/json writes unescaped (it escapes ", \, <, > and &,
// control characters and, in UTF-8, U+2028 and U+2029; non-ASCII is left to
// it too).
func String(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// Time reports whether t is one time.Time.MarshalJSON writes without an
// error (year 0 to 9999, zone offset under 24 hours) and with a whole
// minute of offset, so AppendTime gives MarshalJSON's bytes.
func Time(t time.Time) bool {
	_, off := t.Zone()
	return t.Year() >= 0 && t.Year() <= 9999 && off%60 == 0 && off > -24*3600 && off < 24*3600
}

// AppendTime appends t as MarshalJSON writes it (quoted RFC 3339 with
// nanoseconds) when Time(t).
func AppendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// Compact reports whether raw, valid JSON, is written unchanged by
// json.Marshal as a json.RawMessage: no whitespace outside strings (which
// Marshal removes) and nothing it escapes (<, >, & and U+2028, U+2029,
// whose UTF-8 starts with 0xE2). It does not check that raw is valid.
func Compact(raw []byte) bool {
	in := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '<', '>', '&', 0xE2:
			return false
		case ' ', '\t', '\n', '\r':
			if !in {
				return false
			}
		case '"':
			in = !in
		case '\\':
			if in {
				i++ // the escaped byte: never a quote that ends the string
			}
		}
	}
	return true
}
