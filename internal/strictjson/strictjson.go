// Package strictjson checks a JSON document against the field names of the
// Go type it is about to be decoded into, exactly, before a decoder sees it.
//
// encoding/json matches object keys to struct fields regardless of case and
// keeps the last of repeated keys; mapstructure matches regardless of case
// too. So {"TYPE":"ok","Cost":1} and {"cost":-1,"cost":1} decode "fine" into
// something the client may not have meant. Check refuses both, naming the key
// by its path ("cost", "jobs[3].cost", "job_types.encode.admission"):
//
//   - an object decoded into a struct may hold only the struct's field names,
//     spelt exactly as its tag (or, untagged, its Go name) spells them;
//   - no object, at any depth, may hold the same key twice.
//
// A value decoded into an interface type or into a type that decodes itself
// (json.Unmarshaler, such as json.RawMessage) is free-form: Check does not
// look inside it at all, neither at names nor at repeats. Map keys are free;
// map values are checked as their type says. A value whose JSON type does not
// fit the Go type (an object where a number goes) is skipped, for the decoder
// to refuse.
//
// Check reads tokens with a json.Decoder (numbers as json.Number, so no number
// the decoder would take makes Check fail), so it also reports the syntax
// errors the decoder would; only the first value of data is read.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// Kind is the kind of problem Check found.
type Kind int

const (
	// Unknown is a key that is not exactly one of its struct's field names.
	Unknown Kind = iota + 1
	// Repeated is a key that its object holds more than once.
	Repeated
)

// Error is the first field problem Check found.
type Error struct {
	// Path is the offending key's path in the document: "cost",
	// "jobs[3].cost", "job_types.encode.admission.limit". Object keys are
	// joined with ".", array indexes are in brackets.
	Path string
	// Kind says what is wrong with it.
	Kind Kind
}

func (e *Error) Error() string {
	if e.Kind == Repeated {
		return fmt.Sprintf("repeated field %q", e.Path)
	}
	return fmt.Sprintf("unknown field %q", e.Path)
}

// MaxDepth bounds the nesting Check follows along the type (encoding/json
// refuses documents nested deeper than 10000 as well).
const MaxDepth = 10000

// ErrTooDeep is returned for a document nested deeper than MaxDepth.
var ErrTooDeep = errors.New("strictjson: nested deeper than 10000")

// Check reads the first JSON value of data and returns an *Error for the
// first unknown or repeated key in it, the decoder's error for malformed
// JSON (io.EOF for empty data), or nil. v is a value of the Go type data is
// decoded into (a pointer to it is fine); tag names the struct tag that
// holds field names ("json", "mapstructure"): the name before its first
// comma, "-" for a field that is never decoded.
func Check(data []byte, v any, tag string) error {
	n := schemaOf(reflect.TypeOf(v), tag)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	err := (&checker{dec: dec}).value(n, "", 0)
	if errors.Is(err, io.EOF) && dec.InputOffset() > 0 {
		// The document ended inside a value (the decoder says io.EOF
		// when a value read on its own finds no bytes).
		return io.ErrUnexpectedEOF
	}
	return err
}

// nodeKind is how Check treats a value of a Go type.
type nodeKind int

const (
	leaf   nodeKind = iota // a scalar: nothing inside to check
	free                   // interface or json.Unmarshaler: not looked into
	object                 // struct: exact field names
	dict                   // map: free keys, checked values
	list                   // slice or array: checked elements
)

// node is the schema of one Go type.
type node struct {
	kind   nodeKind
	fields map[string]*node // object
	elem   *node            // dict values, list elements
}

type schemaKey struct {
	t   reflect.Type
	tag string
}

var schemas sync.Map // schemaKey → *node

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// schemaOf returns the schema of t, built once per type and tag.
func schemaOf(t reflect.Type, tag string) *node {
	if t == nil {
		return &node{kind: free}
	}
	k := schemaKey{t, tag}
	if n, ok := schemas.Load(k); ok {
		return n.(*node)
	}
	n := build(t, tag, map[reflect.Type]*node{})
	schemas.Store(k, n)
	return n
}

// build makes t's schema; seen holds the types being built, so a type that
// contains itself gets one node.
func build(t reflect.Type, tag string, seen map[reflect.Type]*node) *node {
	if n, ok := seen[t]; ok {
		return n
	}
	if t.Kind() == reflect.Interface || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return &node{kind: free}
	}
	n := &node{}
	seen[t] = n
	switch t.Kind() {
	case reflect.Pointer:
		*n = *build(t.Elem(), tag, seen)
	case reflect.Struct:
		n.kind, n.fields = object, map[string]*node{}
		addFields(n, t, tag, seen)
	case reflect.Map:
		n.kind, n.elem = dict, build(t.Elem(), tag, seen)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			break // []byte is a base64 string
		}
		n.kind, n.elem = list, build(t.Elem(), tag, seen)
	}
	return n
}

// addFields adds t's decodable fields to n; an embedded struct without a
// name of its own has its fields promoted, as encoding/json (and
// mapstructure's ",squash") do.
func addFields(n *node, t reflect.Type, tag string, seen map[reflect.Type]*node) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get(tag), ",")
		if name == "-" && opts == "" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && ft.Kind() == reflect.Struct && (name == "" || strings.Contains(","+opts+",", ",squash,")) {
			addFields(n, ft, tag, seen)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		n.fields[name] = build(f.Type, tag, seen)
	}
}

type checker struct {
	dec *json.Decoder
}

// skip is a value read whole and thrown away: the decoder still checks its
// syntax, and hands UnmarshalJSON a slice of its own buffer, so nothing (a
// payload of up to max_body_bytes) is copied.
type skip struct{}

func (*skip) UnmarshalJSON([]byte) error { return nil }

// value checks the next value of the document, of schema n at path.
func (c *checker) value(n *node, path string, depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	if n.kind == free || n.kind == leaf {
		// Read whole: nothing inside is checked (a leaf's object or array
		// is the decoder's type error).
		return c.dec.Decode(&skip{})
	}
	tok, err := c.dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	switch {
	case !ok:
		return nil
	case d == '{' && n.kind != object && n.kind != dict, d == '[' && n.kind != list:
		return c.skip()
	case d == '[':
		for i := 0; c.dec.More(); i++ {
			if err := c.value(n.elem, path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	default:
		var seen keySet
		for c.dec.More() {
			tok, err := c.dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string)
			if !seen.add(key) {
				return &Error{Path: join(path, key), Kind: Repeated}
			}
			child := n.elem
			if n.kind == object {
				if child = n.fields[key]; child == nil {
					return &Error{Path: join(path, key), Kind: Unknown}
				}
			}
			p := "" // only a value looked into needs its path
			if child.kind != free && child.kind != leaf {
				p = join(path, key)
			}
			if err := c.value(child, p, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = c.dec.Token() // the closing delimiter
	return err
}

// skip reads the rest of the object or array just opened, unchecked.
func (c *checker) skip() error {
	for depth := 1; depth > 0; {
		tok, err := c.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// keySet is the keys of one object: a short list, a map once it grows.
type keySet struct {
	few  [8]string
	n    int
	many map[string]bool
}

// add adds key and reports whether it was new.
func (s *keySet) add(key string) bool {
	if s.many != nil {
		if s.many[key] {
			return false
		}
		s.many[key] = true
		return true
	}
	for _, k := range s.few[:s.n] {
		if k == key {
			return false
		}
	}
	if s.n < len(s.few) {
		s.few[s.n] = key
		s.n++
		return true
	}
	s.many = make(map[string]bool, 2*len(s.few))
	for _, k := range s.few {
		s.many[k] = true
	}
	s.many[key] = true
	return true
}

func join(path, key string) string {
	if key == "" {
		// A member named "" is named visibly, not as its parent.
		key = `""`
	}
	if path == "" {
		return key
	}
	return path + "." + key
}
