package redisq

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/lua"
)

// TestScriptRepliesChecked: every twin's parser refuses a reply of the
// wrong shape or type with an error wrapping lua.ErrReply that names its
// script, and accepts the right one.
func TestScriptRepliesChecked(t *testing.T) {
	t.Parallel()
	parsers := []struct {
		script string
		parse  func(any) error
		good   any
		bad    []any
	}{
		{"enqueue.lua", func(v any) error { _, _, err := parseEnqueue(v); return err },
			[]any{int64(2), int64(5)}, []any{int64(1), []any{int64(1)}, []any{int64(1), "5"}}},
		{"claim.lua", func(v any) error { _, err := parseClaim(v); return err },
			[]any{"a|t", "{}", int64(0), int64(-1), int64(0), int64(1700000000000), int64(0)},
			[]any{nil, []any{"a", "{}", int64(0), int64(-1)}, []any{"a", int64(1), int64(0), int64(-1), int64(0), int64(1), int64(0)},
				[]any{"a", "{}", int64(2), int64(-1), int64(0), int64(1), int64(0)}, []any{"a", "{}", int64(0), "x", int64(0), int64(1), int64(0)},
				[]any{"a", "{}", int64(0), int64(-1), "0", int64(1), int64(0)}, []any{"a", "{}", int64(0), int64(-1), int64(0), "1", int64(0)},
				[]any{"a", "{}", int64(0), int64(-1), int64(0), int64(1)}, []any{"a", "{}", int64(0), int64(-1), int64(0), int64(1), "0"}}},
		{"take.lua", func(v any) error { _, err := parseTake(v, 2); return err },
			[]any{int64(1500), int64(-1), int64(1), int64(0), int64(0), int64(0), "a|t.1", "{}", int64(0), int64(0), int64(0), int64(1), int64(5), int64(900)},
			takeBadReplies()},
		{"ack.lua", func(v any) error { _, err := parseAck(v, 2); return err },
			[]any{int64(1), int64(0)}, []any{int64(1), []any{int64(1)}, []any{int64(1), int64(2)}, []any{int64(1), "1"}, []any{int64(1), int64(0), int64(1)}}},
		{"release.lua", func(v any) error { _, err := parseHeld(lua.Release, v); return err },
			int64(0), []any{int64(-1), []any{int64(1)}}},
		{"lease_defer.lua", func(v any) error { _, err := parseDefer(v); return err },
			int64(1700000000000), []any{int64(-5), "1"}},
		{"lease_extend.lua", func(v any) error { _, err := parseExtend(v); return err },
			[]any{"a|t"}, []any{int64(0), []any{int64(1)}}},
		{"reap.lua", func(v any) error { _, err := parseReap(v); return err },
			int64(3), []any{int64(-1), "3"}},
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

// takeBadReplies are take.lua replies parseTake must refuse (k = 2).
func takeBadReplies() []any {
	head := func(n, wait int64) []any {
		return []any{int64(1500), int64(-1), n, wait, int64(0), int64(0)}
	}
	clock := func(us int64) []any {
		h := head(1, 0)
		h[0] = us
		return h
	}
	job := func(member string, cancelled, attempt int64) []any {
		return []any{member, "{}", cancelled, int64(0), int64(0), attempt, int64(5), int64(0)}
	}
	delayed := func(attempt, delay int64) []any {
		j := job("a|t.1", 0, attempt)
		j[7] = delay
		return j
	}
	cat := func(parts ...[]any) []any {
		var out []any
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	return []any{nil, []any{int64(1), int64(-1)}, head(1, 0), head(3, 0),
		cat(head(1, 0), job("a|t.1", 0, 1)[:6]),
		cat(head(1, 0), job("", 0, 1)),
		cat(head(1, 0), job("a|t.1", 2, 1)),
		cat(head(1, 0), job("a|t.1", 0, -1)),
		head(0, -1),
		cat(clock(0), job("a|t.1", 0, 1)),  // no clock
		cat(clock(-1), job("a|t.1", 0, 1)), // a clock before the epoch
		cat(head(1, 0), delayed(1, -1)),
		cat(head(1, 0), delayed(1, 1000001)), // over queue.TurnAheadMax
		cat(head(1, 0), delayed(0, 100)),     // a delay of an unstarted job
		cat(head(1, 0), []any{"a|t.1", int64(3), int64(0), int64(0), int64(0), int64(1), int64(5), int64(0)})}
}
