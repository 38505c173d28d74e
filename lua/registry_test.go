package lua

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestRegistryCoversEveryFile: every embedded file is a registered script or
// a module, never both, and every module is part of a registered script.
func TestRegistryCoversEveryFile(t *testing.T) {
	registered := map[string]bool{}
	for _, s := range All() {
		registered[s.Name()] = true
	}
	modules := map[string]bool{}
	for _, m := range Modules {
		modules[m] = true
	}
	for _, name := range Names() {
		switch {
		case registered[name] && modules[name] && name != "admit.lua":
			t.Errorf("%s is both a script and a module", name)
		case !registered[name] && !modules[name]:
			t.Errorf("%s is embedded but not registered (lua/registry.go)", name)
		}
	}
	for _, m := range Modules {
		found := false
		for _, s := range All() {
			found = found || strings.Contains(s.Src(), "-- "+m+":")
		}
		if !found {
			t.Errorf("module %s is in no registered script", m)
		}
	}
}

// TestLoadAll: Redis accepts every registered script; a private Redis that
// was never loaded then runs them by SHA.
func TestLoadAll(t *testing.T) {
	ctx := context.Background()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	defer rdb.Close()
	if err := LoadAll(ctx, rdb); err != nil {
		t.Fatalf("LoadAll: %v", err)
	}
	var shas []string
	for _, s := range All() {
		shas = append(shas, s.SHA())
	}
	exists, err := rdb.ScriptExists(ctx, shas...).Result()
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range exists {
		if !ok {
			t.Errorf("%s not in the script cache after LoadAll", All()[i].Name())
		}
	}
	if err := LoadAll(ctx, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})); err == nil {
		t.Error("LoadAll on an unreachable Redis: nil error")
	}
}

// TestNoScriptRule: after SCRIPT FLUSH, a lone call, a pipelined group of
// calls with other commands, and a Group call each get their reply (sent
// again as EVAL), and each such call is counted in Reloads.
func TestNoScriptRule(t *testing.T) {
	ctx := context.Background()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	defer rdb.Close()
	echo := New(testenv.Name(t, "echo")+".lua", "-- echo\nreturn ARGV[1]")
	call := func(v string) Call { return Call{Script: echo, Keys: []string{"k"}, Args: []any{v}} }

	if v, err := call("alone").Run(ctx, rdb).Text(); err != nil || v != "alone" {
		t.Fatalf("Run after no load = %q, %v", v, err)
	}
	rdb.ScriptFlush(ctx)
	var also *redis.StatusCmd
	cmds := Exec(ctx, rdb, []Call{call("a"), call("b")}, func(p redis.Pipeliner) { also = p.Set(ctx, "k", "v", 0) })
	for i, want := range []string{"a", "b"} {
		if v, err := cmds[i].Text(); err != nil || v != want {
			t.Errorf("Exec call %d = %q, %v; want %q", i, v, err, want)
		}
	}
	if also.Err() != nil {
		t.Errorf("the other command of the pipeline: %v", also.Err())
	}
	rdb.ScriptFlush(ctx)
	g := NewGroup(rdb, 1, 0)
	if v, err := g.Do(ctx, call("grouped")); err != nil || v != "grouped" {
		t.Errorf("Group.Do = %v, %v", v, err)
	}
	if got := echo.Reloads(); got != 4 {
		t.Errorf("Reloads() = %d, want 4 (one lone, two pipelined, one grouped)", got)
	}
}

// TestReplyChecks: the shared reply checks name the script and what was
// wrong.
func TestReplyChecks(t *testing.T) {
	s := New("x.lua", "return 1")
	if _, err := s.Ints([]any{int64(1), "2"}, 2); err == nil || !strings.Contains(err.Error(), "x.lua") || !strings.Contains(err.Error(), "element 2") {
		t.Errorf("Ints with a string: %v", err)
	}
	if _, err := s.Array(int64(3), 1, 1); err == nil {
		t.Error("Array of an integer: nil error")
	}
	if _, err := s.Array([]any{}, 1, 2); err == nil {
		t.Error("Array too short: nil error")
	}
	if v, err := s.Ints([]any{int64(1), int64(2)}, 2); err != nil || v[1] != 2 {
		t.Errorf("Ints = %v, %v", v, err)
	}
}

// TestExecThen: then's commands follow the calls in the same pipeline, and
// after a NOSCRIPT they are queued again after the EVAL, so the ones the
// caller reads last see the calls' writes.
func TestExecThen(t *testing.T) {
	ctx := context.Background()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	defer rdb.Close()
	incr := New(testenv.Name(t, "incr")+".lua", "-- incr\nreturn redis.call('INCR', KEYS[1])")
	for _, flush := range []bool{false, true} {
		if flush {
			rdb.ScriptFlush(ctx)
		} else if err := incr.Load(ctx, rdb); err != nil {
			t.Fatal(err)
		}
		before := incr.Reloads()
		var get *redis.StringCmd
		cmds := ExecThen(ctx, rdb, []Call{{Script: incr, Keys: []string{"n"}}}, func(p redis.Pipeliner) { get = p.Get(ctx, "n") })
		n, err := cmds[0].Int64()
		if err != nil {
			t.Fatalf("flush %v: call: %v", flush, err)
		}
		if got, err := get.Int64(); err != nil || got != n {
			t.Errorf("flush %v: GET after the call = %d, %v; want %d, the call's write", flush, got, err, n)
		}
		if reloads := incr.Reloads() - before; reloads != map[bool]uint64{false: 0, true: 1}[flush] {
			t.Errorf("flush %v: %d reloads", flush, reloads)
		}
	}
}
