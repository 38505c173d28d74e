package strictjson

import (
	"bytes"
	"unicode/utf8"
)

// scanDepth bounds the nesting the scanner follows (checked or not); a
// deeper document is the walk's, which knows MaxDepth and the decoder's own
// bound.
const scanDepth = 256

// dictKeys is how many keys of one map the scanner compares pairwise; an
// object with more is the walk's (it keeps a set).
const dictKeys = 32

// freeNode is the schema of a value inside a value Check does not look into.
var freeNode = &node{kind: free}

// scanner is Check's fast path: a byte scanner over data that allocates
// nothing. clean reports whether data's first value is an object or an
// array that is well-formed JSON as encoding/json's scanner defines it
// (RFC 8259: strings of bytes >= 0x20 with valid escapes, numbers by the
// grammar, the three literals) with no unknown or repeated key along n, no
// checked key that holds an escape or invalid UTF-8 (its bytes are then
// exactly the name the decoder reads), at most dictKeys keys in a map and
// at most scanDepth levels. For such a document the walk would return nil,
// since it then meets no syntax error and compares the same keys along the
// same schema; for every other document clean is false and the walk
// answers. Nothing after the first value is read (nor by the walk).
type scanner struct {
	data []byte
	pos  int
}

func (s *scanner) clean(n *node) bool {
	s.space()
	if s.pos >= len(s.data) || (s.data[s.pos] != '{' && s.data[s.pos] != '[') {
		return false // a scalar or nothing: the walk's, with the decoder's rules
	}
	return s.value(n, 0)
}

// value reads one value of schema n at s.pos.
func (s *scanner) value(n *node, depth int) bool {
	if depth > scanDepth || s.pos >= len(s.data) {
		return false
	}
	if n.kind == free || n.kind == leaf {
		n = freeNode // nothing inside is checked
	}
	switch c := s.data[s.pos]; c {
	case '{':
		if n.kind == dict {
			return s.dict(n.elem, depth)
		}
		if n.kind != object {
			n = freeNode // the decoder's type error
		}
		return s.object(n, depth)
	case '[':
		elem := freeNode
		if n.kind == list {
			elem = n.elem
		}
		return s.array(elem, depth)
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number()
}

// object reads an object: a struct's (n's fields, each at most once) or,
// for freeNode, any members.
func (s *scanner) object(n *node, depth int) bool {
	s.pos++
	if s.space(); s.at('}') {
		s.pos++
		return true
	}
	var seen uint64
	for {
		child := freeNode
		if n.kind == object {
			start, end, plain := s.key()
			if !plain {
				return false
			}
			f := n.fields[string(s.data[start:end])]
			if f.bit == 0 || seen&f.bit != 0 {
				return false // unknown, repeated or past the 64th field
			}
			seen |= f.bit
			child = f.node
		} else if !s.at('"') {
			return false
		} else if _, _, ok := s.str(); !ok {
			return false
		}
		done, ok := s.member(child, depth)
		if !ok || done {
			return ok
		}
	}
}

// dict reads an object decoded into a map of elem: free keys, each once.
func (s *scanner) dict(elem *node, depth int) bool {
	s.pos++
	if s.space(); s.at('}') {
		s.pos++
		return true
	}
	var keys [dictKeys][2]int
	for i := 0; ; i++ {
		start, end, plain := s.key()
		if !plain || i == dictKeys {
			return false
		}
		k := s.data[start:end]
		for _, b := range keys[:i] {
			if bytes.Equal(s.data[b[0]:b[1]], k) {
				return false
			}
		}
		keys[i] = [2]int{start, end}
		done, ok := s.member(elem, depth)
		if !ok || done {
			return ok
		}
	}
}

// member reads the rest of an object member after its key (the colon, a
// value of schema n, the comma or the closing brace) and reports whether
// the object ended.
func (s *scanner) member(n *node, depth int) (done, ok bool) {
	if s.space(); !s.at(':') {
		return false, false
	}
	s.pos++
	if s.space(); !s.value(n, depth+1) {
		return false, false
	}
	return s.next('}')
}

// array reads an array of elem.
func (s *scanner) array(elem *node, depth int) bool {
	s.pos++
	if s.space(); s.at(']') {
		s.pos++
		return true
	}
	for {
		if s.space(); !s.value(elem, depth+1) {
			return false
		}
		if done, ok := s.next(']'); !ok || done {
			return ok
		}
	}
}

// next reads, after a value in a container, the comma before the next one
// (and the space after it) or the closing delimiter, and reports which.
func (s *scanner) next(closing byte) (done, ok bool) {
	s.space()
	switch {
	case s.at(','):
		s.pos++
		s.space()
		return false, true
	case s.at(closing):
		s.pos++
		return true, true
	}
	return false, false
}

// key reads an object key; end is -1 for anything but a string. plain
// says it is a string whose bytes are its value: no escape, valid UTF-8.
func (s *scanner) key() (start, end int, plain bool) {
	if !s.at('"') {
		return 0, -1, false
	}
	start, end, ok := s.str()
	if !ok {
		return 0, -1, false
	}
	plain = bytes.IndexByte(s.data[start:end], '\\') < 0 && utf8.Valid(s.data[start:end])
	return start, end, plain
}

// str reads the string at s.pos and returns the bounds of its contents.
func (s *scanner) str() (start, end int, ok bool) {
	start = s.pos + 1
	for i := start; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.pos = i + 1
			return start, i, true
		case c < 0x20:
			return 0, 0, false
		case c == '\\':
			n := escapeLen(s.data[i+1:])
			if n == 0 {
				return 0, 0, false
			}
			i += n
		}
	}
	return 0, 0, false
}

// escapeLen is the length of the escape that b (after a backslash) starts
// with, 0 for none.
func escapeLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(b) < 5 {
			return 0
		}
		for _, c := range b[1:5] {
			if !isHex(c) {
				return 0
			}
		}
		return 5
	}
	return 0
}

// number reads a number by RFC 8259's grammar.
func (s *scanner) number() bool {
	i := s.pos
	if i < len(s.data) && s.data[i] == '-' {
		i++
	}
	switch {
	case i < len(s.data) && s.data[i] == '0':
		i++
	case i < len(s.data) && '1' <= s.data[i] && s.data[i] <= '9':
		i = digits(s.data, i)
	default:
		return false
	}
	if i < len(s.data) && s.data[i] == '.' {
		if j := digits(s.data, i+1); j > i+1 {
			i = j
		} else {
			return false
		}
	}
	if i < len(s.data) && (s.data[i] == 'e' || s.data[i] == 'E') {
		i++
		if i < len(s.data) && (s.data[i] == '+' || s.data[i] == '-') {
			i++
		}
		j := digits(s.data, i)
		if j == i {
			return false
		}
		i = j
	}
	s.pos = i
	return true
}

// digits returns the index of the first byte at or after i that is not a
// decimal digit.
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func (s *scanner) literal(word string) bool {
	end := s.pos + len(word)
	if end > len(s.data) || string(s.data[s.pos:end]) != word {
		return false
	}
	s.pos = end
	return true
}

func (s *scanner) at(c byte) bool { return s.pos < len(s.data) && s.data[s.pos] == c }

// space skips JSON white space.
func (s *scanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
