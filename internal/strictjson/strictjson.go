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
// Check reports the syntax errors a json.Decoder would (it reads numbers as
// json.Number, so no number the decoder would take makes Check fail); only
// the first value of data is read. It reads data in two ways: a byte
// scanner, which allocates nothing, answers for a document it finds clean
// (well-formed JSON, every checked key escape-free and known, nothing
// nested too deep for it); any other document (a problem, a doubt, a key
// with an escape) is walked again with a json.Decoder's tokens, and that
// walk's answer is Check's, so every answer is the decoder's.
package strictjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
// comma, "-" for a field that is never decoded. Check is safe for
// concurrent use; once the schema of v's type and tag is built (on the
// first call), a clean object or array (see the package comment) costs no
// allocation.
func Check(data []byte, v any, tag string) error {
	n := schemaOf(reflect.TypeOf(v), tag)
	if s := (scanner{data: data}); s.clean(n) {
		return nil
	}
	return walk(data, n)
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
	fields map[string]field // object
	elem   *node            // dict values, list elements
}

// field is a struct field's schema and its bit in the scanner's set of the
// fields an object has given (0 past the 64th field: the walk's business).
type field struct {
	node *node
	bit  uint64
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
		n.kind, n.fields = object, map[string]field{}
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
		fd, ok := n.fields[name] // a promoted name given again keeps its bit
		if !ok && len(n.fields) < 64 {
			fd.bit = 1 << len(n.fields)
		}
		fd.node = build(f.Type, tag, seen)
		n.fields[name] = fd
	}
}
