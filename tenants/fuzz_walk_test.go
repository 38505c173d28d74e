package tenants

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/sluicehq/sluice/config"
)

// strictSpec says why raw, a spec or patch DecodeSpec or ApplyPatch
// accepted, is not strict JSON (a member name not spelt exactly as a field
// of config.Tenant, or repeated), or returns "".
func strictSpec(raw []byte) string {
	w := &specWalk{dec: json.NewDecoder(bytes.NewReader(raw))}
	w.dec.UseNumber()
	return w.value(reflect.TypeOf(config.Tenant{}), "")
}

// specWalk reads a document token by token. broken is set at the first
// error: a json.Decoder's error is sticky, but More still peeks at the
// bytes after it, so a loop on More alone would never end.
type specWalk struct {
	dec    *json.Decoder
	broken bool
}

func (w *specWalk) token() (json.Token, bool) {
	if w.broken {
		return nil, false
	}
	tok, err := w.dec.Token()
	w.broken = err != nil
	return tok, !w.broken
}

func (w *specWalk) more() bool { return !w.broken && w.dec.More() }

// value reads one value of Go type typ and checks its member names.
func (w *specWalk) value(typ reflect.Type, path string) string {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	tok, ok := w.token()
	if !ok {
		return ""
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return "" // a scalar or null
	}
	switch {
	case d == '{' && typ.Kind() == reflect.Struct:
		names := map[string]reflect.Type{}
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("mapstructure"), ",")
			names[name] = typ.Field(i).Type
		}
		return w.members(path, func(name string) (reflect.Type, bool) {
			ft, ok := names[name]
			return ft, ok
		})
	case d == '{' && typ.Kind() == reflect.Map:
		return w.members(path, func(string) (reflect.Type, bool) { return typ.Elem(), true })
	case d == '[' && typ.Kind() == reflect.Slice:
		for w.more() {
			if msg := w.value(typ.Elem(), path+"[]"); msg != "" {
				return msg
			}
		}
		w.token()
		return ""
	}
	// Not the shape of typ (the decoder refuses it or reads it otherwise):
	// skip it.
	for depth := 1; depth > 0; {
		tok, ok := w.token()
		if !ok {
			return ""
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return ""
}

// members reads an object's members after its '{': each name must be known
// (field gives its type) and appear once.
func (w *specWalk) members(path string, field func(string) (reflect.Type, bool)) string {
	seen := map[string]bool{}
	for w.more() {
		tok, ok := w.token()
		if !ok {
			return ""
		}
		name, _ := tok.(string)
		p := joinPath(path, name)
		ft, ok := field(name)
		switch {
		case !ok:
			return fmt.Sprintf("unknown field %q", p)
		case seen[name]:
			return fmt.Sprintf("repeated field %q", p)
		}
		seen[name] = true
		if msg := w.value(ft, p); msg != "" {
			return msg
		}
	}
	w.token()
	return ""
}
