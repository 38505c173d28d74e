package lua

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// admitFiles are the files Admit assembles.
var admitFiles = append(append([]string{"num.lua", "admit_prelude.lua"}, AdmitModules...), "admit_decide.lua", "admit.lua")

// TestScriptsHaveHeaders: every embedded file, script or module, opens with
// a comment block that starts with its name and names its KEYS, ARGV and
// returns.
func TestScriptsHaveHeaders(t *testing.T) {
	for _, name := range Names() {
		src, err := Source(name)
		if err != nil {
			t.Fatal(err)
		}
		var header strings.Builder
		for _, line := range strings.Split(src, "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header.WriteString(line + "\n")
		}
		for _, word := range []string{"KEYS", "ARGV", "Returns"} {
			if !strings.Contains(strings.ToLower(header.String()), strings.ToLower(word)) {
				t.Errorf("%s: header does not mention %s", name, word)
			}
		}
		if !strings.HasPrefix(src, "-- "+name+":") {
			t.Errorf("%s: header does not start with the file's name", name)
		}
	}
}

// TestAdmitAssembly: the script is the modules in order, then the driver,
// built once.
func TestAdmitAssembly(t *testing.T) {
	s := Admit()
	if s != Admit() {
		t.Error("Admit() built the script twice")
	}
	if s.Name() != "admit.lua" {
		t.Errorf("Name() = %q, want admit.lua", s.Name())
	}
	at := -1
	for _, name := range admitFiles {
		i := strings.Index(s.Src(), "-- "+name+":")
		if i <= at {
			t.Errorf("%s found at %d, want after %d", name, i, at)
		}
		at = i
	}
}

// TestAdmitFilesLoad: Redis accepts the assembled script and every module on
// its own (SCRIPT LOAD compiles it); a module run on its own touches nothing.
func TestAdmitFilesLoad(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	if err := Admit().Load(ctx, rdb); err != nil {
		t.Fatalf("Load(admit.lua): %v", err)
	}
	tenant := testenv.Name(t, "luaadm")
	for _, name := range AdmitModules {
		s := mustLoad(name)
		if err := s.Load(ctx, rdb); err != nil {
			t.Errorf("Load(%s): %v", name, err)
		}
		key := keys.Admission(tenant, strings.TrimSuffix(name, ".lua"), "tenant")
		if err := s.Run(ctx, rdb, []string{key}).Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.Errorf("running %s alone: %v", name, err)
		}
	}
	if n := rdb.Keys(ctx, "sluice:{"+tenant+"}*").Val(); len(n) != 0 {
		t.Errorf("modules run alone wrote keys %v", n)
	}
}

// TestAdmitRefusesBadArguments: a call whose layout does not add up is
// refused whole; a decision with a bad policy or cost gets its own error
// element. Neither writes anything.
func TestAdmitRefusesBadArguments(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "luaadm")
	backlog := keys.Backlog(tenant)
	state := keys.Admission(tenant, "gcra", "tenant")
	gcra := []any{"gcra", 10, 1000000, 10}
	call := func(pol []any, decision ...any) []any {
		return append(append([]any{0, 1, 1}, pol...), decision...)
	}
	whole := []struct {
		name string
		keys []string
		args []any
		want string
	}{
		{"no decisions", nil, []any{0, 0, 0}, "m >= 1 decisions"},
		{"negative now", []string{state}, []any{-1, 1, 0, 1, 0, 0, 0}, "want now"},
		{"no policy count", []string{state}, call(gcra, 1, 0, 0), "decision 1 has no cost"},
		{"keys short", []string{state}, call(gcra, 1, 5, 0, 1, 1, 1), "want 2 keys"},
		{"args left over", []string{state}, call(gcra, 1, 0, 0, 1, 1, 1, 7), "args for 1 decisions"},
		{"policy table short", []string{state}, []any{0, 1, 2, "gcra", 10, 1000000, 10, 1, 0, 0, 1, 1, 1}, "decision 1 has no"},
	}
	for _, c := range whole {
		t.Run(c.name, func(t *testing.T) {
			err := Admit().Run(ctx, rdb, c.keys, c.args...).Err()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error = %v, want it to contain %q", err, c.want)
			}
		})
	}
	own := []struct {
		name string
		keys []string
		args []any
		want string
	}{
		{"unknown algorithm", []string{state}, call([]any{"leaky", 10, 1000000, 10}, 1, 0, 0, 1, 1, 1), "bad policy 1"},
		{"zero limit", []string{state}, call([]any{"gcra", 0, 1000000, 10}, 1, 0, 0, 1, 1, 1), "bad policy 1"},
		{"zero policy cost", []string{state}, call(gcra, 1, 0, 0, 1, 1, 0), "bad policy 1"},
		{"no such policy", []string{state}, call(gcra, 1, 0, 0, 1, 2, 1), "bad policy 1"},
		{"zero cost", []string{backlog, state}, call(gcra, 0, 5, 0, 1, 1, 1), "cost must be >= 1"},
	}
	for _, c := range own {
		t.Run(c.name, func(t *testing.T) {
			reply, err := Admit().Run(ctx, rdb, c.keys, c.args...).Result()
			if err != nil {
				t.Fatalf("call error %v, want the decision's own error", err)
			}
			arr, _ := reply.([]any)
			if len(arr) != 1 {
				t.Fatalf("reply %#v, want one element", reply)
			}
			if e, ok := arr[0].(error); !ok || !strings.Contains(e.Error(), c.want) {
				t.Errorf("element = %#v, want an error containing %q", arr[0], c.want)
			}
		})
	}
	if n := rdb.Keys(ctx, "sluice:{"+tenant+"}*").Val(); len(n) != 0 {
		t.Errorf("refused calls wrote keys %v", n)
	}
}

// TestLoadNamesBrokenScript: a script Redis refuses fails Load with an error
// naming it.
func TestLoadNamesBrokenScript(t *testing.T) {
	err := New("broken.lua", "return (").Load(context.Background(), testenv.Redis(t))
	if err == nil || !strings.Contains(err.Error(), "broken.lua") {
		t.Fatalf("Load = %v, want an error naming broken.lua", err)
	}
}

// TestAdmitFor: each module has a one-module script with the same driver,
// and an unknown module has none.
func TestAdmitFor(t *testing.T) {
	for _, m := range AdmitModules {
		s := AdmitFor(m)
		if s == nil || s == AdmitFor(m) && !strings.HasSuffix(strings.TrimSpace(s.Src()), strings.TrimSpace(mustSource(t, "admit.lua"))) {
			t.Errorf("AdmitFor(%q): want the module followed by admit.lua", m)
		}
		if s != nil && s.SHA() == Admit().SHA() {
			t.Errorf("AdmitFor(%q) is the composite script", m)
		}
	}
	if AdmitFor("leaky_bucket.lua") != nil {
		t.Error("AdmitFor(leaky_bucket.lua) != nil, want nil")
	}
}

func mustSource(t *testing.T, name string) string {
	t.Helper()
	src, err := Source(name)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// TestAdmitMany: one call decides several requests, each exactly as its
// own call would, their integers in one flat reply: in order (the second request on a one-unit GCRA key is
// refused after the first took it), a bad policy answered by that
// decision's own error while the others stand, a dry run writing nothing,
// and the policy table shared (two decisions name policy 1).
func TestAdmitMany(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "luamany")
	backlog := keys.Backlog(tenant)
	gcra := keys.Admission(tenant, "gcra", "tenant")
	window := keys.Admission(tenant, "fixed_window", "tenant")
	other := keys.Admission(tenant, "gcra", "other")
	const now = 1_700_000_000_000_000
	args := []any{now, 5, 4,
		"gcra", 1, 1_000_000, 1, // 1: one unit per second, burst 1
		"nope", 1, 1_000_000, 1, // 2: unknown
		"fixed_window", 5, 1_000_000, 1, // 3: five per second
		"gcra", 1000, 1_000_000, 10, // 4
		1, 0, 0, 1, 1, 1, // takes policy 1's unit
		1, 10, 0, 1, 1, 1, // gated (backlog 0 of 10); refused by policy 1
		1, 0, 0, 1, 2, 1, // the unknown policy: its own error
		1, 0, 1, 1, 3, 1, // dry run
		1, 0, 0, 2, 3, 1, 4, 1, // two policies
	}
	ks := []string{gcra, backlog, gcra, gcra, window, window, other}
	reply, err := Admit().Run(ctx, rdb, ks, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reply.([]any)
	if !ok {
		t.Fatalf("reply = %#v, want an array", reply)
	}
	want := [][]int64{
		{1, 0, 0, 1, 1, 0, 0, 1_000_000},
		{0, 1, 0, 0, 1, 0, 1_000_000, 1_000_000},
		nil,
		{1, 0, 0, 1, 5, 5, 0, 0},
		{1, 0, 0, 1, 5, 4, 0, 1_000_000, 1, 10, 9, 0, 1_000},
	}
	i := 0
	for j, w := range want {
		if w == nil {
			if e, ok := res[i].(error); !ok || !strings.Contains(e.Error(), "bad policy 1") {
				t.Errorf("decision %d = %#v, want the error bad policy 1", j+1, res[i])
			}
			i++
			continue
		}
		if i+len(w) > len(res) {
			t.Fatalf("reply %v ends before decision %d", res, j+1)
		}
		for x := range w {
			if res[i+x] != w[x] {
				t.Errorf("decision %d = %v, want %v", j+1, res[i:i+len(w)], w)
				break
			}
		}
		i += len(w)
	}
	if i != len(res) {
		t.Errorf("reply has %d elements, want %d", len(res), i)
	}
}

// TestAdmitManyRedisError: a Redis error inside one decision (its GCRA key
// holds a hash: WRONGTYPE) is that decision's own element, multi-policy
// decisions around it answer in full, and the reply has no hole.
func TestAdmitManyRedisError(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "luamany")
	good := keys.Admission(tenant, "gcra", "good")
	window := keys.Admission(tenant, "fixed_window", "w")
	bad := keys.Admission(tenant, "gcra", "bad")
	if err := rdb.HSet(ctx, bad, "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.PExpire(ctx, bad, time.Minute)
	const now = 1_700_000_000_000_000
	args := []any{now, 3, 2,
		"gcra", 10, 1_000_000, 10,
		"fixed_window", 5, 1_000_000, 1,
		1, 0, 0, 2, 1, 1, 2, 1, // gcra good + window
		1, 0, 0, 2, 2, 1, 1, 1, // window + gcra bad: WRONGTYPE
		1, 0, 0, 1, 1, 1, // gcra good again
	}
	reply, err := Admit().Run(ctx, rdb, []string{good, window, window, bad, good}, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	res, _ := reply.([]any)
	if len(res) != 13+1+8 {
		t.Fatalf("reply = %v, want 13 + 1 + 8 elements", res)
	}
	if res[0] != int64(1) || res[13+1] != int64(1) {
		t.Errorf("the decisions around the failing one: %v and %v, want both admitted", res[:13], res[14:])
	}
	if e, ok := res[13].(error); !ok || !strings.Contains(e.Error(), "WRONGTYPE") {
		t.Errorf("decision 2 = %#v, want its WRONGTYPE error", res[13])
	}
	if n := rdb.Get(ctx, window+":1700000000").Val(); n != "1" {
		t.Errorf("window count = %q, want 1: the failing decision wrote nothing to it", n)
	}
}
