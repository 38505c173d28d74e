package limits

import (
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// TestNewAdmitterNeedsRedis: a missing Redis is an error naming the field;
// the rest of the zero config is usable.
func TestNewAdmitterNeedsRedis(t *testing.T) {
	t.Parallel()
	if _, err := NewAdmitter(AdmitterConfig{}); err == nil || !strings.Contains(err.Error(), "Redis") {
		t.Errorf("NewAdmitter(zero config) error = %v, want one naming Redis", err)
	}
}

// TestAlgorithmsHaveModules: Algorithms, the one list of algorithms, and
// the admission script's modules (lua.AdmitModules) name the same ones.
func TestAlgorithmsHaveModules(t *testing.T) {
	t.Parallel()
	if len(Algorithms) != len(lua.AdmitModules) {
		t.Fatalf("%d algorithms, %d admission modules (%v)", len(Algorithms), len(lua.AdmitModules), lua.AdmitModules)
	}
	for _, alg := range Algorithms {
		if lua.AdmitFor(string(alg)+".lua") == nil {
			t.Errorf("algorithm %s has no admission module %s.lua", alg, alg)
		}
	}
}

// TestScriptFor: a request whose policies share one algorithm runs that
// algorithm's one-module script; a mixed one runs the composite.
func TestScriptFor(t *testing.T) {
	t.Parallel()
	// A client that is never contacted: scriptFor makes no call.
	a := admNew(t, redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	g := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 1, Period: time.Second}
	f := Policy{Name: "type.x", Algorithm: AlgFixedWindow, Limit: 1, Period: time.Second}
	for _, c := range []struct {
		name string
		req  Request
		want string
	}{
		{"none", Request{}, "admit.lua"},
		{"one gcra", Request{Policies: []Policy{g}}, "admit.lua(gcra.lua)"},
		{"two fixed windows", Request{Policies: []Policy{f, {Name: "t", Algorithm: AlgFixedWindow, Limit: 2, Period: time.Second}}}, "admit.lua(fixed_window.lua)"},
		{"mixed", Request{Policies: []Policy{g, f}}, "admit.lua"},
	} {
		if got := a.scriptFor(c.req).Name(); got != c.want {
			t.Errorf("%s: script %s, want %s", c.name, got, c.want)
		}
	}
}
