package limits

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
)

// TestNoScriptRecovery flushes the script cache of a private Redis (SCRIPT
// FLUSH, then a restart) and checks that the next decisions succeed, batched
// or not: NOSCRIPT is answered by loading the script again.
func TestNoScriptRecovery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	p := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 1000, Period: time.Second}
	for _, mode := range admModes {
		t.Run(mode.name, func(t *testing.T) {
			a := admNew(t, rdb, mode.cfg)
			tenant := admTenant(t, rdb)
			decide := func(when string) {
				t.Helper()
				for range 3 {
					d, err := a.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{p}})
					if err != nil || !d.Allowed {
						t.Fatalf("%s: %+v, %v; want admitted", when, d, err)
					}
				}
			}
			decide("after Load")
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			decide("after SCRIPT FLUSH")
			srv.Kill()
			srv.Start()
			decide("after a restart")
		})
	}
}

// TestNoScriptInPipeline sends one pipeline of several decisions whose
// script (a variant of admit.lua) was never loaded, on the standalone Redis
// and on the cluster (tenants on every master): every call of the batch must
// succeed after one reload. Nothing shared is flushed, since other packages'
// tests use these servers.
func TestNoScriptInPipeline(t *testing.T) {
	t.Parallel()
	cluster := testenv.Cluster(t)
	for _, c := range []struct {
		name    string
		rdb     redis.UniversalClient
		tenants func(t *testing.T) []string
	}{
		{"standalone", testenv.Redis(t), nil},
		{"cluster", cluster, func(t *testing.T) []string { return admSpreadTenants(t, cluster) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := admNew(t, c.rdb)
			a.script = lua.New("admit.lua", lua.Admit().Src()+"\n-- "+testenv.Name(t, "variant")+"\n")
			tenants := []string{admTenant(t, c.rdb), admTenant(t, c.rdb), admTenant(t, c.rdb)}
			if c.tenants != nil {
				tenants = c.tenants(t)
			}
			p := Policy{Name: "tenant", Algorithm: AlgTokenBucket, Limit: 1000, Period: time.Second}
			var batch []*call
			for _, tenant := range tenants {
				var e encoded
				if err := a.encode(Request{Tenant: tenant, Policies: []Policy{p}}, &e); err != nil {
					t.Fatal(err)
				}
				batch = append(batch, &call{ctx: context.Background(), script: a.script, tenant: tenant, enc: &e, done: make(chan struct{}, 1)})
			}
			a.batch.exec(batch)
			for i, cl := range batch {
				<-cl.done
				if cl.err != nil {
					t.Errorf("call %d: %v", i, cl.err)
					continue
				}
				if d, err := decode(lua.Admit(), Request{Policies: []Policy{p}}, cl.reply); err != nil || !d.Allowed {
					t.Errorf("call %d: %+v, %v; want admitted", i, d, err)
				}
			}
			// One EVAL per script call answered NOSCRIPT: the standalone
			// batch is one call (many tenants), the cluster's one per tenant.
			want := uint64(1)
			if c.tenants != nil {
				want = uint64(len(tenants))
			}
			if n := a.script.Reloads(); n != want {
				t.Errorf("%d calls sent again as EVAL for one pipeline, want %d", n, want)
			}
		})
	}
}

// TestDecodeRejectsUnexpectedReplies: every element of the reply is checked;
// a wrong shape is an error naming the script and the element, never a
// panic.
func TestDecodeRejectsUnexpectedReplies(t *testing.T) {
	t.Parallel()
	req := Request{Tenant: "acme", Policies: []Policy{{Name: "tenant"}}}
	ok := []any{int64(1), int64(0), int64(0), int64(1), int64(3), int64(2), int64(0), int64(1000)}
	with := func(i int, v any) []any {
		r := append([]any(nil), ok...)
		r[i] = v
		return r
	}
	cases := []struct {
		name  string
		reply any
		want  string
	}{
		{"not an array", "OK", "string, want an array"},
		{"nil", nil, "<nil>, want an array"},
		{"short", ok[:7], "7 elements, want 8"},
		{"string element", with(5, "2"), "element 6 is string"},
		{"float element", with(2, 1.5), "element 3 is float64"},
		{"violated out of range", with(1, int64(2)), "element 2 (violated) is 2"},
		{"allowed with violated", with(1, int64(1)), "allowed 1 with violated 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decode(lua.Admit(), req, c.reply)
			if !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), "admit.lua") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("decode(%v) error = %v, want lua.ErrReply naming admit.lua and %q", c.reply, err, c.want)
			}
		})
	}
	if _, err := decode(lua.Admit(), req, ok); err != nil {
		t.Errorf("decode of a valid reply: %v", err)
	}
}

// TestSplitReplyCutsTheFlatReply: a call's flat reply is cut into each
// decision's integers or its own error, and one that is short, too long or
// not an array is refused whole with lua.ErrReply.
func TestSplitReplyCutsTheFlatReply(t *testing.T) {
	t.Parallel()
	one := &encoded{pols: []polRef{{}}} // 3 + 5 integers
	none := &encoded{}                  // 3 integers
	ints := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = int64(i)
		}
		return out
	}
	ds := []*encoded{one, none, one}
	// As go-redis hands it over: an error element is a value of an error type.
	reply := append(append(append([]any{}, ints(8)...), ints(3)...), errors.New("ERR admit: bad policy 1"))
	out := make([]answer, 3)
	if err := splitReply(lua.Admit(), reply, ds, out); err != nil {
		t.Fatalf("splitReply: %v", err)
	}
	if r, _ := out[0].reply.([]any); len(r) != 8 || out[0].err != nil {
		t.Errorf("decision 1 = %+v, want 8 integers", out[0])
	}
	if r, _ := out[1].reply.([]any); len(r) != 3 || out[1].err != nil {
		t.Errorf("decision 2 = %+v, want 3 integers", out[1])
	}
	if out[2].err == nil || !strings.Contains(out[2].err.Error(), "bad policy 1") {
		t.Errorf("decision 3 = %+v, want its own error", out[2])
	}
	for _, c := range []struct {
		name  string
		reply any
		want  string
	}{
		{"not an array", "OK", "want an array"},
		{"short", reply[:9], "short at decision 2"},
		{"left over", append(append([]any{}, reply...), int64(1)), "1 left over"},
	} {
		if err := splitReply(lua.Admit(), c.reply, ds, out); !errors.Is(err, lua.ErrReply) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error = %v, want lua.ErrReply with %q", c.name, err, c.want)
		}
	}
}

// TestAdmitRejectsBadRequests: invalid requests fail before any round trip,
// with an error naming what is wrong that wraps ErrInvalidRequest (a caller
// never fails open on it).
func TestAdmitRejectsBadRequests(t *testing.T) {
	t.Parallel()
	a := admNew(t, testenv.Redis(t))
	p := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 10, Period: time.Second}
	cases := []struct {
		name string
		req  Request
		want string
	}{
		{"tenant", Request{Tenant: "a b", Policies: []Policy{p}}, "invalid tenant"},
		{"cost", Request{Tenant: "acme", Policies: []Policy{p}, Cost: -1}, "cost -1"},
		{"backlog", Request{Tenant: "acme", Policies: []Policy{p}, MaxBacklog: -1}, "max backlog -1"},
		{"now", Request{Tenant: "acme", Policies: []Policy{p}, Now: time.Unix(-5, 0)}, "not after the unix epoch"},
		{"policy", Request{Tenant: "acme", Policies: []Policy{{Name: "tenant", Algorithm: AlgGCRA}}}, "limit: must be >= 1 (got 0)"},
		{"duplicate", Request{Tenant: "acme", Policies: []Policy{p, p}}, `"tenant" used twice`},
		{"cost above MaxCost", Request{Tenant: "acme", Policies: []Policy{p}, Cost: MaxCost + 1}, "cost 9007199254740992"},
		{"cost wrapped", Request{Tenant: "acme", Cost: math.MinInt64 + 1}, "cost -9223372036854775807"},
		{"policy cost above MaxCost", Request{Tenant: "acme", Policies: []Policy{p}, Costs: []int64{math.MaxInt64}}, `cost 9223372036854775807 of policy "tenant"`},
		{"policy cost negative", Request{Tenant: "acme", Policies: []Policy{p}, Costs: []int64{-2}}, `cost -2 of policy "tenant"`},
		{"costs count", Request{Tenant: "acme", Policies: []Policy{p}, Costs: []int64{1, 1}}, "2 costs for 1 policies"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := a.Admit(context.Background(), c.req)
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("Admit(%+v) error = %v, want ErrInvalidRequest containing %q", c.req, err, c.want)
			}
		})
	}
}

// TestPausedRedisReturnsErrors pauses a private Redis (SIGSTOP): batched
// callers must get an error when their ctx ends or the client times out,
// never hang, and decisions must succeed again after SIGCONT. Serial (no
// t.Parallel): it bounds how long callers take to give up.
func TestPausedRedisReturnsErrors(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	a := admNew(t, rdb)
	tenant := admTenant(t, rdb)
	p := Policy{Name: "tenant", Algorithm: AlgGCRA, Limit: 1000, Period: time.Second}

	srv.Pause()
	start := time.Now()
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := a.Admit(ctx, Request{Tenant: tenant, Policies: []Policy{p}})
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err == nil {
			t.Error("Admit succeeded against a paused Redis")
		}
	}
	// Callers whose ctx ends return at 100ms; a caller flushing inline waits
	// for the client's 300ms read timeout. 2s leaves room for a loaded host.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("callers took %v to give up, want about the client timeout (300ms)", d)
	}
	srv.Resume()
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, err := a.Admit(context.Background(), Request{Tenant: tenant, Policies: []Policy{p}})
		if err == nil && d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Resume: %+v, %v", d, err)
		}
	}
}
