package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/memo"
	"github.com/sluicehq/sluice/lua"
)

// Admitter decides Requests with the admission script (lua.Admit(), or the
// one-module script of lua.AdmitFor), on a standalone Redis, a Redis Cluster
// or a Ring: one EVALSHA per lone decision, and concurrent decisions share
// round trips and script calls unless AdmitterConfig.Unbatched. It is safe
// for concurrent use and needs no shutdown: batches run on short-lived
// goroutines that end when the work does.
type Admitter struct {
	rdb    redis.UniversalClient
	script *lua.Script // every module: requests mixing algorithms
	// single holds, per algorithm, the script with that module alone, for
	// requests whose policies all use it (the common case).
	single map[Algorithm]*lua.Script
	// submit and submitSingle are the same for lua/submit.lua (Submit).
	submit       *lua.Script
	submitSingle map[Algorithm]*lua.Script
	batch        *batcher // nil: one round trip per call, unbatched
	metrics      *metrics

	// Memoized per tenant and per policy, so the hot path neither matches
	// regexps, formats keys nor boxes integers on every call.
	tenants  memo.Memo[string, string]         // tenant → backlog key, "" if invalid
	policies memo.Memo[Policy, *encodedPolicy] // validation and ARGV values
	stateKey memo.Memo[stateKeyOf, string]     // keys.Admission
}

// Defaults of AdmitterConfig.
const (
	// DefaultMaxBatch is AdmitterConfig.MaxBatch's default.
	DefaultMaxBatch = 128
	// DefaultPipelines is AdmitterConfig.Pipelines' default
	// (docs/adr/0002-admission-scripts.md says why).
	DefaultPipelines = 2
)

// AdmitterConfig configures an Admitter. Its zero value, with Redis set, is
// the production setting.
type AdmitterConfig struct {
	// Redis holds the admission state: a standalone Redis, a Cluster or a
	// Ring. Required.
	Redis redis.UniversalClient
	// Unbatched sends every decision in its own round trip. By default
	// (false) decisions that arrive while earlier ones are on the wire are
	// sent together in one round trip: on a standalone Redis as one EVALSHA
	// in the script's "many" layout, on a cluster or ring one such EVALSHA
	// per tenant (a script call may only touch one slot), pipelined. Each
	// decision is still decided exactly as its own call would be, all or
	// nothing, with its own reply or error; a decision that finds nothing in
	// flight is sent at once by its own caller as a plain EVALSHA.
	Unbatched bool
	// MaxBatch caps the decisions per pipeline (0: DefaultMaxBatch).
	MaxBatch int
	// Pipelines caps the pipelines in flight at once (0: DefaultPipelines).
	Pipelines int
	// Logger receives the Admitter's warnings (nil: slog.Default()).
	Logger *slog.Logger
	// Registerer receives the Admitter's metrics,
	// sluice_admission_batch_size (nil: none; they still count). Script
	// reloads are counted for every script in lua.Collector's
	// sluice_script_reloads_total.
	Registerer prometheus.Registerer
}

// NewAdmitter returns an Admitter on cfg.Redis. A service runs lua.LoadAll
// before serving, so a broken script stops its start. The only error is a
// missing Redis.
func NewAdmitter(cfg AdmitterConfig) (*Admitter, error) {
	if cfg.Redis == nil {
		return nil, errors.New("limits: new admitter: Redis is required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	a := &Admitter{rdb: cfg.Redis, script: lua.Admit(), metrics: newMetrics(cfg.Registerer, log)}
	a.submit = lua.Submit()
	a.single = make(map[Algorithm]*lua.Script, len(Algorithms))
	a.submitSingle = make(map[Algorithm]*lua.Script, len(Algorithms))
	for _, alg := range Algorithms {
		if s := lua.AdmitFor(string(alg) + ".lua"); s != nil {
			a.single[alg] = s
		}
		if s := lua.SubmitFor(string(alg) + ".lua"); s != nil {
			a.submitSingle[alg] = s
		}
	}
	a.tenants.Max, a.policies.Max, a.stateKey.Max = maxMemo, maxMemo, maxMemo
	if !cfg.Unbatched {
		maxBatch, pipes := cfg.MaxBatch, cfg.Pipelines
		if maxBatch <= 0 {
			maxBatch = DefaultMaxBatch
		}
		if pipes <= 0 {
			pipes = DefaultPipelines
		}
		_, standalone := cfg.Redis.(*redis.Client)
		a.batch = newBatcher(a, maxBatch, pipes, standalone)
	}
	return a, nil
}

// scriptFor picks the script of r: the one-module script when all of r's
// policies use one algorithm, else the composite.
func (a *Admitter) scriptFor(r Request) *lua.Script {
	return pick(r, a.script, a.single)
}

// pick returns single's script for the one algorithm of r's policies, else
// all (no policy, or several algorithms).
func pick(r Request, all *lua.Script, single map[Algorithm]*lua.Script) *lua.Script {
	if len(r.Policies) == 0 {
		return all
	}
	alg := r.Policies[0].Algorithm
	for _, p := range r.Policies[1:] {
		if p.Algorithm != alg {
			return all
		}
	}
	if s, ok := single[alg]; ok {
		return s
	}
	return all
}

// run decides d in one script call of its own, in its own round trip
// (lua.Call.Run, with its NOSCRIPT rule), and returns d's reply.
func (a *Admitter) run(ctx context.Context, s *lua.Script, d *encoded) (any, error) {
	reply, err := admitCall(s, []*encoded{d}).Run(ctx, a.rdb).Result()
	if err != nil {
		return nil, err
	}
	var out [1]answer
	if err := splitReply(s, reply, []*encoded{d}, out[:]); err != nil {
		return nil, err
	}
	return out[0].reply, out[0].err
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
	return decode(s, r, reply)
}
