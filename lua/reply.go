package lua

import (
	"errors"
	"fmt"
)

// ErrReply marks a script reply of the wrong shape or type: a reply parser
// (a script's Go twin) returns it wrapped, naming the script and what was
// wrong, and the caller treats it as it treats a Redis error (never as a
// refusal or a drop).
var ErrReply = errors.New("unexpected script reply")

// ReplyError returns an error wrapping ErrReply that names the script and
// what was wrong with its reply.
func (s *Script) ReplyError(format string, args ...any) error {
	return fmt.Errorf("%w from %s: %s", ErrReply, s.name, fmt.Sprintf(format, args...))
}

// Array returns v as an array of at least min and, when max >= 0, at most
// max elements.
func (s *Script) Array(v any, min, max int) ([]any, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, s.ReplyError("%T, want an array", v)
	}
	if len(arr) < min || (max >= 0 && len(arr) > max) {
		if min == max {
			return nil, s.ReplyError("%d elements, want %d", len(arr), min)
		}
		return nil, s.ReplyError("%d elements, want %d to %d", len(arr), min, max)
	}
	return arr, nil
}

// Int returns v, element what of the reply, as an integer.
func (s *Script) Int(v any, what string) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, s.typeError(what, v, "an integer")
	}
	return n, nil
}

// typeError is the error of a reply element what that is not of the type
// want names.
func (s *Script) typeError(what string, v any, want string) error {
	return s.ReplyError("%s is %T (%v), want %s", what, v, v, want)
}

// Ints returns v as an array of exactly n integers (n < 0: any number).
func (s *Script) Ints(v any, n int) ([]int64, error) {
	arr, err := s.Array(v, max(n, 0), n)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(arr))
	for i, e := range arr {
		n, ok := e.(int64)
		if !ok {
			// The element's name is formatted only here: a Sprintf per
			// element was a few allocations on every take and finish.
			return nil, s.typeError(fmt.Sprintf("element %d", i+1), e, "an integer")
		}
		out[i] = n
	}
	return out, nil
}

// String returns v, element what of the reply, as a string.
func (s *Script) String(v any, what string) (string, error) {
	str, ok := v.(string)
	if !ok {
		return "", s.typeError(what, v, "a string")
	}
	return str, nil
}

// Strings returns v as an array of strings.
func (s *Script) Strings(v any) ([]string, error) {
	arr, err := s.Array(v, 0, -1)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		str, ok := e.(string)
		if !ok {
			return nil, s.typeError(fmt.Sprintf("element %d", i+1), e, "a string")
		}
		out[i] = str
	}
	return out, nil
}
