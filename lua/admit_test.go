package lua

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// admitFiles are the files Admit assembles.
var admitFiles = append(append([]string{"admit_prelude.lua"}, AdmitModules...), "admit.lua")

// TestAdmitFilesHaveHeaders: every file opens with a comment block naming
// its KEYS, ARGV and returns.
func TestAdmitFilesHaveHeaders(t *testing.T) {
	for _, name := range admitFiles {
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
		s := MustLoad(name)
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

// TestAdmitRefusesBadArguments: malformed calls get an error reply and
// write nothing.
func TestAdmitRefusesBadArguments(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "luaadm")
	backlog := keys.Backlog(tenant)
	state := keys.Admission(tenant, "gcra", "tenant")
	cases := []struct {
		name string
		keys []string
		args []any
		want string
	}{
		{"missing policy args", []string{backlog, state}, []any{0, 1, 0, 0, "gcra", 10}, "want 1 + n keys"},
		{"keys do not match", []string{backlog}, []any{0, 1, 0, 0, "gcra", 10, 1000000, 10, 1}, "want 1 + n keys"},
		{"unknown algorithm", []string{backlog, state}, []any{0, 1, 0, 0, "leaky", 10, 1000000, 10, 1}, "bad policy 1"},
		{"zero limit", []string{backlog, state}, []any{0, 1, 0, 0, "gcra", 0, 1000000, 10, 1}, "bad policy 1"},
		{"zero policy cost", []string{backlog, state}, []any{0, 1, 0, 0, "gcra", 10, 1000000, 10, 0}, "bad policy 1"},
		{"zero cost", []string{backlog, state}, []any{0, 0, 0, 0, "gcra", 10, 1000000, 10, 1}, "cost must be >= 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Admit().Run(ctx, rdb, c.keys, c.args...).Err()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error = %v, want it to contain %q", err, c.want)
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

// TestAdmitMany: the "many" layout decides several requests in one call,
// each exactly as its own call would: in order (the second request on a
// one-unit GCRA key is refused after the first took it), with its own
// error reply for a bad policy while the others stand, and a layout that
// does not add up is refused whole, before any write.
func TestAdmitMany(t *testing.T) {
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "luamany")
	backlog := keys.Backlog(tenant)
	gcra := keys.Admission(tenant, "gcra", "tenant")
	window := keys.Admission(tenant, "fixed_window", "tenant")
	const now = 1_700_000_000_000_000
	one := []any{"gcra", 1, 1_000_000, 1, 1}           // one unit per second, burst 1
	fixed := []any{"fixed_window", 5, 1_000_000, 1, 1} // five per second
	decision := func(dry int, pol ...[]any) []any {
		out := []any{len(pol), now, 1, 0, dry}
		for _, p := range pol {
			out = append(out, p...)
		}
		return out
	}
	args := []any{"many", 5}
	args = append(args, decision(0, one)...)
	args = append(args, decision(0, one)...)
	args = append(args, decision(0, []any{"nope", 1, 1_000_000, 1, 1})...)
	args = append(args, decision(1, fixed)...)
	args = append(args, decision(0, fixed, []any{"gcra", 1000, 1_000_000, 10, 1})...)
	ks := []string{backlog, gcra, backlog, gcra, backlog, gcra, backlog, window, backlog, window, keys.Admission(tenant, "gcra", "other")}
	reply, err := Admit().Run(ctx, rdb, ks, args...).Result()
	if err != nil {
		t.Fatal(err)
	}
	res, ok := reply.([]any)
	if !ok || len(res) != 5 {
		t.Fatalf("reply = %#v, want 5 elements", reply)
	}
	want := [][]int64{
		{1, 0, 0, 1, 1, 0, 0, 1_000_000},         // takes the unit
		{0, 1, 0, 0, 1, 0, 1_000_000, 1_000_000}, // refused: the first took it
		nil,                                      // bad policy: an error
		{1, 0, 0, 1, 5, 5, 0, 0},                 // dry run: writes nothing
		{1, 0, 0, 1, 5, 4, 0, 1_000_000, 1, 10, 9, 0, 1_000},
	}
	for j, w := range want {
		if w == nil {
			if e, ok := res[j].(error); !ok || !strings.Contains(e.Error(), "bad policy 1") {
				t.Errorf("decision %d = %#v, want the error bad policy 1", j+1, res[j])
			}
			continue
		}
		got, ok := res[j].([]any)
		if !ok || len(got) != len(w) {
			t.Errorf("decision %d = %#v, want %v", j+1, res[j], w)
			continue
		}
		for i := range w {
			if got[i] != w[i] {
				t.Errorf("decision %d = %v, want %v", j+1, got, w)
				break
			}
		}
	}

	other := testenv.Name(t, "luamany")
	bad := []struct {
		name string
		keys []string
		args []any
	}{
		{"no count", []string{keys.Backlog(other), keys.Admission(other, "gcra", "tenant")}, append([]any{"many", "x"}, decision(0, one)...)},
		{"keys short", []string{keys.Backlog(other), keys.Admission(other, "gcra", "tenant")}, append(append([]any{"many", 2}, decision(0, one)...), decision(0, one)...)},
		{"args left over", []string{keys.Backlog(other), keys.Admission(other, "gcra", "tenant")}, append(append([]any{"many", 1}, decision(0, one)...), 7)},
	}
	for _, c := range bad {
		if err := Admit().Run(ctx, rdb, c.keys, c.args...).Err(); err == nil || !strings.Contains(err.Error(), "admit: many") {
			t.Errorf("%s: error = %v, want an admit: many error", c.name, err)
		}
	}
	if n := rdb.Keys(ctx, "sluice:{"+other+"}*").Val(); len(n) != 0 {
		t.Errorf("refused calls wrote keys %v", n)
	}
}
