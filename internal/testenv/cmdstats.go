package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// CommandCalls returns how many times the server behind rdb has run the
// named commands (lower case, as INFO commandstats spells them: "evalsha",
// "eval"), summed, since it started or since CONFIG RESETSTAT. A test
// compares two readings over a window on a private server (StartRedis), so
// other tests' calls do not count.
func CommandCalls(t testing.TB, rdb *redis.Client, names ...string) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("testenv: INFO commandstats: %v", err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want["cmdstat_"+n] = true
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !want[name] {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("testenv: INFO commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}
