package testenv

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// CommandCalls returns how many times the server behind rdb has run the
// named commands (lower case, as INFO commandstats spells them: "evalsha",
// "eval"), summed, since it started or since CONFIG RESETSTAT. A test
// compares two readings over a window on a private server (StartRedis), so
// other tests' calls do not count.
func CommandCalls(t testing.TB, rdb *redis.Client, names ...string) int64 {
	t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want["cmdstat_"+n] = true
	}
	return commandCalls(t, rdb, func(name string) bool { return want[name] })
}

// commandCalls sums the calls of INFO commandstats' lines whose name
// ("cmdstat_evalsha") count says to count.
func commandCalls(t testing.TB, rdb *redis.Client, count func(name string) bool) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("testenv: INFO commandstats: %v", err)
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !count(name) {
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

// RedisCPU returns the CPU time (user + system, INFO cpu) the server behind
// rdb has used since it started. A benchmark divides the difference of two
// readings by its requests, on a private server (StartRedis) so that other
// clients' work does not count.
func RedisCPU(t testing.TB, rdb *redis.Client) time.Duration {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		t.Fatalf("testenv: INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "used_cpu_user" && name != "used_cpu_sys") {
			continue
		}
		s, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("testenv: INFO cpu line %q: %v", line, err)
		}
		total += s
	}
	return time.Duration(total * float64(time.Second))
}

// CommandTotal returns how many commands the server behind rdb has run
// since it started, every command INFO commandstats lists (those a script
// runs included) but INFO itself and a new connection's handshake (HELLO,
// CLIENT ...), so neither a test's own readings nor the client's pool
// count. A test compares two readings around one call on a private server
// (StartRedis).
func CommandTotal(t testing.TB, rdb *redis.Client) int64 {
	t.Helper()
	return commandCalls(t, rdb, func(name string) bool {
		return strings.HasPrefix(name, "cmdstat_") && !handshake[name] && !strings.HasPrefix(name, "cmdstat_client|")
	})
}

// handshake is what CommandTotal leaves out besides CLIENT's subcommands.
var handshake = map[string]bool{"cmdstat_info": true, "cmdstat_hello": true, "cmdstat_auth": true, "cmdstat_select": true}

// KeysWithoutTTL returns the keys matching pattern (SCAN MATCH) on the
// server behind rdb that have no TTL (PTTL <= 0), sorted: a test that ran a
// tenant's jobs on a private server checks that every key it left has one.
// No key matching pattern fails the test (nothing was checked).
func KeysWithoutTTL(t testing.TB, rdb *redis.Client, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	var bad []string
	seen := 0
	iter := rdb.Scan(ctx, 0, pattern, 100).Iterator()
	for iter.Next(ctx) {
		seen++
		if ttl := rdb.PTTL(ctx, iter.Val()).Val(); ttl <= 0 {
			bad = append(bad, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("testenv: SCAN %s: %v", pattern, err)
	}
	if seen == 0 {
		t.Fatalf("testenv: no key matches %s", pattern)
	}
	sort.Strings(bad)
	return bad
}
