package ingest

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/lua"
)

// TestParseStatsRefusesMalformedReplies: tenant_stats.lua's Go twin takes
// 12 strings and nothing else; any other reply is an error wrapping
// lua.ErrReply (the stats answer a 5xx, as after a Redis error).
func TestParseStatsRefusesMalformedReplies(t *testing.T) {
	good := make([]any, 12)
	for i := range good {
		good[i] = ""
	}
	withInt := append([]any(nil), good...)
	withInt[9] = int64(3)
	for _, tc := range []struct {
		name  string
		reply any
		ok    bool
	}{
		{"12 strings", good, true},
		{"11 strings", good[:11], false},
		{"13 strings", append(append([]any(nil), good...), ""), false},
		{"an integer among them", withInt, false},
		{"not an array", "OK", false},
		{"nil", nil, false},
	} {
		res, err := parseStats(tc.reply)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, lua.ErrReply)) {
			t.Errorf("%s: parseStats = %v, %v; want ok %v (errors wrap lua.ErrReply)", tc.name, res, err, tc.ok)
		}
	}
}
