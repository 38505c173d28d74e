package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
)

// walk is Check's answer for a document the scanner did not find clean: it
// reads data's tokens with a json.Decoder along n.
func walk(data []byte, n *node) error {
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
				if child = n.fields[key].node; child == nil {
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
