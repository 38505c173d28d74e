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
		{"kafka_finish.lua", func(v any) error { _, err := parseKafkaFinish(v, 2); return err },
			int64(0), []any{int64(-1), "0", nil}},
		// head {now, wait, taken, water, rate, now_us}, per job {cancelled, beat, done, attempt, delay}
		{"kafka_take.lua", func(v any) error { _, err := parseKafkaTake(v, 2); return err },
			ints(5, 0, 2, 0, 0, 5000, 0, 0, 0, 1, 0, 1, 7, 0, 0, 0),
			[]any{nil, int64(5), []any{}, []any{int64(5)}, // not an array, or too short
				ints(5, 0, 2, 0, 0, 5000, 0, 0, 0, 1, 0),                      // one job for two
				ints(5, 0, 2, 0, 0, 5000, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0),    // too long
				ints(5, 0, 2, 0, 0, 5000, 0, 0, 0, 1, 0, 0, 0, 0, 1),          // the older reply, without delays
				ints(0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0),          // now 0
				ints(5, 0, 2, 0, 0, 4999, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0),       // the bucket's clock behind now
				ints(5, 0, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0),          // now_us 0
				ints(5, 0, 2, 0, 0, 5000, 2, 0, 0, 1, 0, 0, 0, 0, 1, 0),       // cancelled 2
				ints(5, 0, 2, 0, 0, 5000, 0, 0, 0, -1, 0, 0, 0, 0, 1, 0),      // attempt -1
				ints(5, 0, 2, 0, 0, 5000, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0),       // cancelled, started
				ints(5, -1, 0, 0, 0, 5000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),      // wait -1
				ints(5, 0, 2, -1, 0, 5000, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0),      // water -1
				ints(5, 0, 2, 0, -1, 5000, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0),      // rate -1
				ints(5, 0, 3, 0, 0, 5000, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0),       // 3 taken of 2
				ints(5, 0, 0, 0, 0, 5000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),       // none taken, no wait
				ints(5, 9, 2, 1, 1, 5000, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),       // a wait with jobs taken
				ints(5, 0, 1, 1, 1, 5000, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0),       // past the one taken, a job started
				ints(5, 0, 2, 1, 1, 5000, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0),       // a delay with a job not started
				ints(5, 0, 2, 1, 1, 5000, 0, 0, 0, 1, 1000001, 0, 0, 0, 1, 0), // a delay past queue.TurnAheadMax
				ints(5, 0, 2, 1, 1, 5000, 0, 0, 0, 1, -1, 0, 0, 0, 1, 0),      // a negative delay
				[]any{int64(5), int64(0), int64(2), int64(0), int64(0), int64(5000), "0", int64(0), int64(0), int64(1), int64(0), int64(1), int64(7), int64(0), int64(0), int64(0)}, // a string
			}},
		{"kafka_take.lua", func(v any) error { _, err := parseKafkaTake(v, 2); return err },
			ints(5, 0, 1, 2000000, 1000, 5000, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0), // the second job's turn later: one taken
			nil},
		{"kafka_take.lua", func(v any) error { _, err := parseKafkaTake(v, 1); return err },
			ints(5, 0, 1, 2000000, 1000, 5000, 0, 0, 0, 1, 9),
			[]any{
				ints(5, 0, 1, 0, 0, 5000, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0), // two jobs for one
				ints(5, 9, 1, 2000000, 1000, 5000, 0, 0, 0, 1, 0),       // a wait with the job taken and started
				ints(5, 9, 0, 2000000, 1000, 5000, 0, 0, 0, 1, 0),       // a wait with the job started
				ints(5, 0, 0, 2000000, 1000, 5000, 0, 0, 0, 0, 0),       // not taken without a wait
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

// ints is a reply array of integers.
func ints(v ...int64) []any {
	out := make([]any, len(v))
	for i, n := range v {
		out[i] = n
	}
	return out
}
