package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// Request is one admission question: may Tenant's job of Cost units pass
// every one of Policies and the backlog gate?
type Request struct {
	// Tenant is the tenant id (keys.ValidTenant); every key is tagged with it.
	Tenant string
	// Policies are checked together, all or nothing; their Names must differ.
	// None means only the backlog gate applies.
	Policies []Policy
	// Cost is the request's units (a batch of N jobs costs N); 0 means 1.
	// The backlog gate counts it, and so does every policy without its own
	// entry in Costs.
	Cost int64
	// Costs, when not empty, holds one cost per policy (same order as
	// Policies; 0 means Cost): a batch mixing job types charges each type's
	// policy only its own jobs' units.
	Costs []int64
	// MaxBacklog is the backlog gate: refuse when the tenant's backlog
	// (keys.Backlog) + Cost > MaxBacklog. 0 means no gate.
	MaxBacklog int64
	// DryRun decides and reports the state without writing anything: a
	// caller uses it for the limit-state headers of an answer that admits
	// nothing (a validation error, a replay). Results then report the
	// remaining units as they are.
	DryRun bool
	// Now is the decision's instant; the zero Time means Redis TIME, which
	// production uses so that ingest instances with skewed clocks agree. Tests
	// pass explicit instants.
	Now time.Time
}

// Decision is the answer to a Request.
type Decision struct {
	// Allowed says whether the request was admitted; only then was any state
	// written.
	Allowed bool
	// Results holds one Result per Request.Policies, in order.
	Results []Result
	// Violated names the refusing party when not Allowed: "backlog" when the
	// backlog gate refused (it is checked first), else the Name of the first
	// refusing policy. Empty when Allowed.
	Violated string
	// Backlog is the tenant's backlog as read by the script (0 when
	// MaxBacklog is 0, in which case it is not read).
	Backlog int64
}

// ViolatedBacklog is Decision.Violated when the backlog gate refused.
const ViolatedBacklog = "backlog"

// ErrReply marks an admission script reply of an unexpected shape.
var ErrReply = errors.New("unexpected admission script reply")

// Admitter decides Requests with the admission script (lua.Admit(), or the
// one-module script of lua.AdmitFor), on a standalone Redis, a Redis Cluster
// or a Ring: one EVALSHA per lone decision, and concurrent decisions share
// round trips and script calls (see WithBatching). It is safe for concurrent
// use and needs no shutdown: batches run on short-lived goroutines that end
// when the work does.
type Admitter struct {
	rdb    redis.UniversalClient
	script *lua.Script // every module: requests mixing algorithms
	// single holds, per algorithm, the script with that module alone, for
	// requests whose policies all use it (the common case).
	single  map[Algorithm]*lua.Script
	log     *slog.Logger
	batch   *batcher // nil: one round trip per call, unbatched
	metrics *metrics

	// Memoized per tenant and per policy, so the hot path neither matches
	// regexps, formats keys nor boxes integers on every call.
	tenants  memo[string, string]         // tenant → backlog key, "" if invalid
	policies memo[Policy, *encodedPolicy] // validation and ARGV values
	stateKey memo[stateKeyOf, string]     // keys.Admission
}

// maxMemo bounds each of the Admitter's memos.
const maxMemo = 1 << 16

// encodedPolicy is a validated policy's four ARGV values, or why it is
// invalid. Memoized, so requests under one policy share one pointer, which
// is what a script call's policy table deduplicates by.
type encodedPolicy struct {
	err  error
	args [4]any
}

// stateKeyOf names one policy's state key of one tenant.
type stateKeyOf struct{ tenant, algorithm, policy string }

func encodePolicy(p Policy) *encodedPolicy {
	e := &encodedPolicy{err: p.Validate()}
	if e.err == nil {
		e.args = [4]any{string(p.Algorithm), p.Limit, p.Period.Microseconds(), p.burst()}
	}
	return e
}

// polRef is one of a request's policies as sent: its definition and the
// cost charged to it.
type polRef struct {
	def  *encodedPolicy
	cost int64
}

// encoded is one request's share of an admission script call (see the
// layout in lua/admit.lua).
type encoded struct {
	now        int64    // unix µs; 0: Redis TIME
	keys       []string // the backlog key when gated, then one per policy
	cost       int64
	maxBacklog int64
	dry        bool
	pols       []polRef
}

// callArgs builds the KEYS and ARGV of one script call deciding ds, which
// share now: the distinct policies once, in order of first use, then each
// request's part.
func callArgs(ds []*encoded) ([]string, []any) {
	var defs []*encodedPolicy
	nk, na := 0, 3
	for _, d := range ds {
		nk += len(d.keys)
		na += 4 + 2*len(d.pols)
		for _, r := range d.pols {
			if indexOf(defs, r.def) < 0 {
				defs = append(defs, r.def)
			}
		}
	}
	keyList := make([]string, 0, nk)
	args := make([]any, 0, na+4*len(defs))
	args = append(args, ds[0].now, len(ds), len(defs))
	for _, e := range defs {
		args = append(args, e.args[0], e.args[1], e.args[2], e.args[3])
	}
	for _, d := range ds {
		keyList = append(keyList, d.keys...)
		dry := 0
		if d.dry {
			dry = 1
		}
		args = append(args, d.cost, d.maxBacklog, dry, len(d.pols))
		for _, r := range d.pols {
			args = append(args, indexOf(defs, r.def)+1, r.cost)
		}
	}
	return keyList, args
}

// indexOf is the index of e in defs, or -1. A call's distinct policies are
// few (one per plan among its tenants), so a scan beats a map.
func indexOf(defs []*encodedPolicy, e *encodedPolicy) int {
	for i, d := range defs {
		if d == e {
			return i
		}
	}
	return -1
}

func backlogKey(tenant string) string {
	if !keys.ValidTenant(tenant) {
		return ""
	}
	return keys.Backlog(tenant)
}

func stateKey(k stateKeyOf) string { return keys.Admission(k.tenant, k.algorithm, k.policy) }

type config struct {
	batching   bool
	maxBatch   int
	pipelines  int
	log        *slog.Logger
	registerer prometheus.Registerer
}

// Option configures an Admitter.
type Option func(*config)

// WithBatching turns request batching on or off (default on). When on,
// decisions that arrive while earlier ones are on the wire are sent together
// in one round trip: on a standalone Redis as one EVALSHA in the script's
// "many" layout, on a cluster or ring one such EVALSHA per tenant (a script
// call may only touch one slot), pipelined. Each decision is still decided
// exactly as its own call would be, all or nothing, with its own reply or
// error; a decision that finds nothing in flight is sent at once by its own
// caller as a plain EVALSHA. Off, every decision is its own round trip.
func WithBatching(on bool) Option { return func(c *config) { c.batching = on } }

// WithMaxBatch caps the decisions per pipeline (default 128).
func WithMaxBatch(n int) Option { return func(c *config) { c.maxBatch = n } }

// WithPipelines caps the pipelines in flight at once (default 2, which
// used the least CPU per decision in BenchmarkAdmit on 2 CPUs).
func WithPipelines(n int) Option { return func(c *config) { c.pipelines = n } }

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithRegisterer registers the Admitter's metrics on r (default: none):
// sluice_admission_batch_size. Script reloads are counted for every script
// in lua.Collector's sluice_script_reloads_total.
func WithRegisterer(r prometheus.Registerer) Option { return func(c *config) { c.registerer = r } }

// NewAdmitter returns an Admitter on rdb. A service runs lua.LoadAll before
// serving, so a broken script stops its start.
func NewAdmitter(rdb redis.UniversalClient, opts ...Option) *Admitter {
	c := config{batching: true, maxBatch: 128, pipelines: 2, log: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	a := &Admitter{rdb: rdb, script: lua.Admit(), log: c.log, metrics: newMetrics(c.registerer, c.log)}
	a.single = make(map[Algorithm]*lua.Script, len(Algorithms))
	for _, alg := range Algorithms {
		if s := lua.AdmitFor(string(alg) + ".lua"); s != nil {
			a.single[alg] = s
		}
	}
	a.tenants.max, a.policies.max, a.stateKey.max = maxMemo, maxMemo, maxMemo
	if c.batching {
		_, standalone := rdb.(*redis.Client)
		a.batch = newBatcher(a, c.maxBatch, c.pipelines, standalone)
	}
	return a
}

// scriptFor picks the script of r: the one-module script when all of r's
// policies use one algorithm, else the composite.
func (a *Admitter) scriptFor(r Request) *lua.Script {
	if len(r.Policies) == 0 {
		return a.script
	}
	alg := r.Policies[0].Algorithm
	for _, p := range r.Policies[1:] {
		if p.Algorithm != alg {
			return a.script
		}
	}
	if s, ok := a.single[alg]; ok {
		return s
	}
	return a.script
}

// run decides d in one script call of its own, in its own round trip
// (lua.Call.Run, with its NOSCRIPT rule), and returns d's reply.
func (a *Admitter) run(ctx context.Context, s *lua.Script, d *encoded) (any, error) {
	keyList, args := callArgs([]*encoded{d})
	reply, err := lua.Call{Script: s, Keys: keyList, Args: args}.Run(ctx, a.rdb).Result()
	if err != nil {
		return nil, err
	}
	var out [1]answer
	if err := splitReply(reply, []*encoded{d}, out[:]); err != nil {
		return nil, err
	}
	return out[0].reply, out[0].err
}

// answer is one decision's share of a call's reply: its 3 + 5n integers
// (for decode) or its own error.
type answer struct {
	reply any
	err   error
}

// splitReply cuts a call's flat reply (see lua/admit.lua) into the answers
// of ds, in order, and checks that nothing is missing or left over.
func splitReply(reply any, ds []*encoded, out []answer) error {
	arr, ok := reply.([]any)
	if !ok {
		return fmt.Errorf("%w: %T for %d decisions, want an array", ErrReply, reply, len(ds))
	}
	i := 0
	for j, d := range ds {
		if i < len(arr) {
			if err, ok := arr[i].(error); ok {
				out[j] = answer{err: err}
				i++
				continue
			}
		}
		n := 3 + 5*len(d.pols)
		if i+n > len(arr) {
			return fmt.Errorf("%w: %d elements for %d decisions, short at decision %d", ErrReply, len(arr), len(ds), j+1)
		}
		out[j] = answer{reply: arr[i : i+n : i+n]}
		i += n
	}
	if i != len(arr) {
		return fmt.Errorf("%w: %d elements for %d decisions, %d left over", ErrReply, len(arr), len(ds), len(arr)-i)
	}
	return nil
}

// Admit decides r in one EVALSHA: the backlog gate and every policy are
// checked, and the policies' state is advanced only when all of them admit.
// A Redis error is returned wrapped (the caller then fails open or closed);
// NOSCRIPT is never returned (lua.Call.Run sends the call again as EVAL).
func (a *Admitter) Admit(ctx context.Context, r Request) (Decision, error) {
	var e encoded
	if err := a.encode(r, &e); err != nil {
		return Decision{}, err
	}
	s := a.scriptFor(r)
	var (
		reply any
		err   error
	)
	if a.batch != nil {
		reply, err = a.batch.do(ctx, s, r.Tenant, &e)
	} else {
		reply, err = a.run(ctx, s, &e)
	}
	if err != nil {
		return Decision{}, fmt.Errorf("limits: admit %s: %w", r.Tenant, err)
	}
	return decode(s.Name(), r, reply)
}

// encode fills e with r's share of a script call (see lua/admit.lua). Every
// error wraps ErrInvalidRequest: nothing is sent.
func (a *Admitter) encode(r Request, e *encoded) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("limits: admit %s: %w: %s", r.Tenant, ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	backlog := a.tenants.get(r.Tenant, backlogKey)
	if backlog == "" {
		return fmt.Errorf("limits: admit: %w: invalid tenant %q", ErrInvalidRequest, r.Tenant)
	}
	cost := r.Cost
	if cost == 0 {
		cost = 1
	}
	if cost < 0 || cost > MaxCost || r.MaxBacklog < 0 {
		return invalid("cost %d must be in [0, %d] and max backlog %d >= 0", r.Cost, MaxCost, r.MaxBacklog)
	}
	if !r.Now.IsZero() {
		if e.now = r.Now.UnixMicro(); e.now <= 0 {
			return invalid("now %v is not after the unix epoch", r.Now)
		}
	}
	if len(r.Costs) != 0 && len(r.Costs) != len(r.Policies) {
		return invalid("%d costs for %d policies", len(r.Costs), len(r.Policies))
	}
	e.cost, e.maxBacklog, e.dry = cost, r.MaxBacklog, r.DryRun
	e.keys = make([]string, 0, 1+len(r.Policies))
	if r.MaxBacklog > 0 {
		e.keys = append(e.keys, backlog)
	}
	e.pols = make([]polRef, 0, len(r.Policies))
	for i, p := range r.Policies {
		def := a.policies.get(p, encodePolicy)
		if def.err != nil {
			return invalid("%v", def.err)
		}
		for _, q := range r.Policies[:i] {
			if q.Name == p.Name {
				return invalid("policy name %q used twice", p.Name)
			}
		}
		e.keys = append(e.keys, a.stateKey.get(stateKeyOf{r.Tenant, string(p.Algorithm), p.Name}, stateKey))
		pcost := cost
		if len(r.Costs) != 0 && r.Costs[i] != 0 {
			pcost = r.Costs[i]
		}
		if pcost < 0 || pcost > MaxCost {
			return invalid("cost %d of policy %q must be in [0, %d]", pcost, p.Name, MaxCost)
		}
		e.pols = append(e.pols, polRef{def, pcost})
	}
	return nil
}

// decode checks every element of the script's reply and builds a Decision.
func decode(script string, r Request, reply any) (Decision, error) {
	arr, ok := reply.([]any)
	if !ok {
		return Decision{}, fmt.Errorf("limits: admit %s: %s: %w: %T, want array", r.Tenant, script, ErrReply, reply)
	}
	if want := 3 + 5*len(r.Policies); len(arr) != want {
		return Decision{}, fmt.Errorf("limits: admit %s: %s: %w: %d elements, want %d", r.Tenant, script, ErrReply, len(arr), want)
	}
	var bad error
	at := func(i int) int64 {
		n, ok := arr[i].(int64)
		if !ok && bad == nil {
			bad = fmt.Errorf("limits: admit %s: %s: %w: element %d is %T, want integer", r.Tenant, script, ErrReply, i+1, arr[i])
		}
		return n
	}
	flag := func(i int) bool {
		n := at(i)
		if n != 0 && n != 1 && bad == nil {
			bad = fmt.Errorf("limits: admit %s: %s: %w: element %d is %d, want 0 or 1", r.Tenant, script, ErrReply, i+1, n)
		}
		return n == 1
	}
	d := Decision{Allowed: flag(0), Backlog: at(2)}
	violated := at(1)
	if len(r.Policies) > 0 {
		d.Results = make([]Result, len(r.Policies))
	}
	for i, p := range r.Policies {
		e := 3 + 5*i
		d.Results[i] = Result{
			Policy:     p.Name,
			Allowed:    flag(e),
			Limit:      at(e + 1),
			Remaining:  at(e + 2),
			RetryAfter: micros(at(e + 3)),
			ResetAfter: micros(at(e + 4)),
		}
	}
	if bad != nil {
		return Decision{}, bad
	}
	switch v := violated; {
	case v == -1:
		d.Violated = ViolatedBacklog
	case v >= 1 && int(v) <= len(r.Policies):
		d.Violated = r.Policies[v-1].Name
	case v != 0:
		return Decision{}, fmt.Errorf("limits: admit %s: %s: %w: element 2 (violated) is %d", r.Tenant, script, ErrReply, v)
	}
	if d.Allowed != (d.Violated == "") {
		return Decision{}, fmt.Errorf("limits: admit %s: %s: %w: allowed %d with violated %d", r.Tenant, script, ErrReply, at(0), violated)
	}
	return d, nil
}

// micros converts the script's µs, keeping -1 as Never; a wait too long for
// a Duration is the longest one.
func micros(us int64) time.Duration {
	if us < 0 {
		return Never
	}
	if us > int64(math.MaxInt64/time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}
