package kafkaq

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lua"
)

// TestScriptRepliesChecked: the twins' parsers refuse a reply of the wrong
// shape or type with an error wrapping lua.ErrReply that names the script.
func TestScriptRepliesChecked(t *testing.T) {
	t.Parallel()
	parsers := []struct {
		script string
		parse  func(any) error
		good   any
		bad    []any
	}{
		{"kafka_finish.lua", func(v any) error { _, err := parseKafkaFinish(v); return err },
			int64(0), []any{int64(-1), "0", nil}},
		{"kafka_take.lua", func(v any) error { _, err := parseKafkaTake(v, 2); return err },
			[]any{int64(5), int64(0), int64(0), int64(0), int64(1), int64(1), int64(7), int64(0), int64(0)},
			[]any{nil, int64(5), []any{}, []any{int64(5)}, // not an array, or too short
				[]any{int64(5), int64(0), int64(0), int64(0), int64(1)},                                                   // one job for two
				[]any{int64(5), int64(0), int64(0), int64(0), int64(1), int64(0), int64(0), int64(0), int64(1), int64(0)}, // too long
				[]any{int64(0), int64(0), int64(0), int64(0), int64(1), int64(0), int64(0), int64(0), int64(1)},           // now 0
				[]any{int64(5), int64(2), int64(0), int64(0), int64(1), int64(0), int64(0), int64(0), int64(1)},           // cancelled 2
				[]any{int64(5), int64(0), int64(0), int64(0), int64(-1), int64(0), int64(0), int64(0), int64(1)},          // attempt -1
				[]any{int64(5), int64(1), int64(0), int64(0), int64(1), int64(0), int64(0), int64(0), int64(1)},           // cancelled, started
				[]any{int64(5), "0", int64(0), int64(0), int64(1), int64(0), int64(0), int64(0), int64(1)},                // a string
			}},
		{"job_cancelled.lua", func(v any) error { _, err := parseJobCancelled(v); return err },
			[]any{int64(1), int64(0), int64(0), int64(0)}, []any{int64(1), []any{int64(2), int64(0), int64(0), int64(0)},
				[]any{"1", int64(0), int64(0), int64(0)}, []any{int64(1), int64(0), int64(0)}, []any{int64(0), int64(0), int64(0), "5"}, []any{}}},
	}
	for _, p := range parsers {
		if err := p.parse(p.good); err != nil {
			t.Errorf("%s: reply %#v = %v, want nil", p.script, p.good, err)
		}
		for _, v := range p.bad {
			err := p.parse(v)
			if !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), p.script) {
				t.Errorf("%s: reply %#v = %v, want an error wrapping lua.ErrReply naming the script", p.script, v, err)
			}
		}
	}
}
