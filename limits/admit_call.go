package limits

import (
	"fmt"
	"math"
	"time"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// This file is the Go twin of the admission script (lua/admit.lua, its
// KEYS/ARGV/reply layout in its header): encode turns a Request into its
// share of a call, admitCall builds the lua.Call of one or more shares, and
// splitReply and decode check the reply's shape and every element's type
// against what the call sent. Their errors wrap lua.ErrReply and name the
// script; the caller returns them as it returns a Redis error, never as a
// refusal. decode keeps its integer checks inline rather than calling
// lua.Script.Int per element: a decision reads 3 + 5n integers on the hot
// path, and building each element's name for Int would allocate; on a
// failure it reports through the same lua.Script checks.

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
	then       *Then // submit.lua's part after admission; nil for admit.lua
	// The common request's keys, policies and Then live in e itself, so
	// encoding one costs e's own allocation only.
	keyBuf  [3]string
	polBuf  [2]polRef
	thenBuf Then
}

// admitCall is the call of s (lua.Admit or a lua.AdmitFor script) deciding
// ds, which share now: the distinct policies once, in order of first use,
// then each request's part. For a submit script (lua.Submit, lua.SubmitFor:
// every one of ds has its then) each request's Then follows, in turn, after
// all the admission keys and arguments (lua/submit.lua).
func admitCall(s *lua.Script, ds []*encoded) lua.Call {
	var defs []*encodedPolicy
	nk, na := 0, 3
	for _, d := range ds {
		nk += len(d.keys)
		na += 4 + 2*len(d.pols)
		if d.then != nil {
			nk += len(d.then.Keys)
			na += len(d.then.Args)
		}
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
	for _, d := range ds {
		if d.then != nil {
			keyList = append(keyList, d.then.Keys...)
			args = append(args, d.then.Args...)
		}
	}
	return lua.Call{Script: s, Keys: keyList, Args: args}
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

// answer is one decision's share of a call's reply: its 3 + 5n integers
// (for decode) or its own error.
type answer struct {
	reply any
	err   error
}

// splitReply cuts the flat reply of s's call (see lua/admit.lua) into the
// answers of ds, in order, and checks that nothing is missing or left over.
func splitReply(s *lua.Script, reply any, ds []*encoded, out []answer) error {
	arr, err := s.Array(reply, 0, -1)
	if err != nil {
		return fmt.Errorf("%w (for %d decisions)", err, len(ds))
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
		if d.then != nil {
			n += submitReplyExtra
		}
		if i+n > len(arr) {
			return s.ReplyError("%d elements for %d decisions, short at decision %d", len(arr), len(ds), j+1)
		}
		out[j] = answer{reply: arr[i : i+n : i+n]}
		i += n
	}
	if i != len(arr) {
		return s.ReplyError("%d elements for %d decisions, %d left over", len(arr), len(ds), len(arr)-i)
	}
	return nil
}

// encode fills e with r's share of a script call (see lua/admit.lua). Every
// error wraps ErrInvalidRequest: nothing is sent.
func (a *Admitter) encode(r Request, e *encoded) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("limits: admit %s: %w: %s", r.Tenant, ErrInvalidRequest, fmt.Sprintf(format, args...))
	}
	backlog := a.tenants.Get(r.Tenant, backlogKey)
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
	e.keys = e.keyBuf[:0]
	if 1+len(r.Policies) > len(e.keyBuf) {
		e.keys = make([]string, 0, 1+len(r.Policies))
	}
	if r.MaxBacklog > 0 {
		e.keys = append(e.keys, backlog)
	}
	e.pols = e.polBuf[:0]
	if len(r.Policies) > len(e.polBuf) {
		e.pols = make([]polRef, 0, len(r.Policies))
	}
	for i, p := range r.Policies {
		def := a.policies.Get(p, encodePolicy)
		if def.err != nil {
			return invalid("%v", def.err)
		}
		for _, q := range r.Policies[:i] {
			if q.Name == p.Name {
				return invalid("policy name %q used twice", p.Name)
			}
		}
		e.keys = append(e.keys, a.stateKey.Get(stateKeyOf{r.Tenant, string(p.Algorithm), p.Name}, stateKey))
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

// decode checks every element of s's reply to r and builds a Decision.
func decode(s *lua.Script, r Request, reply any) (Decision, error) {
	want := 3 + 5*len(r.Policies)
	arr, err := s.Array(reply, want, want)
	if err != nil {
		return Decision{}, fmt.Errorf("limits: admit %s: %w", r.Tenant, err)
	}
	var bad error
	at := func(i int) int64 {
		n, ok := arr[i].(int64)
		if !ok && bad == nil {
			_, bad = s.Int(arr[i], fmt.Sprintf("element %d", i+1))
		}
		return n
	}
	flag := func(i int) bool {
		n := at(i)
		if n != 0 && n != 1 && bad == nil {
			bad = s.ReplyError("element %d is %d, want 0 or 1", i+1, n)
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
	switch v := violated; {
	case bad != nil:
	case v == -1:
		d.Violated = ViolatedBacklog
	case v >= 1 && int(v) <= len(r.Policies):
		d.Violated = r.Policies[v-1].Name
	case v != 0:
		bad = s.ReplyError("element 2 (violated) is %d", v)
	}
	if bad == nil && d.Allowed != (d.Violated == "") {
		bad = s.ReplyError("allowed %d with violated %d", arr[0], violated)
	}
	if bad != nil {
		return Decision{}, fmt.Errorf("limits: admit %s: %w", r.Tenant, bad)
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
