package limits

import (
	"context"
	"sync"

	"github.com/sluicehq/sluice/internal/groupcommit"
	"github.com/sluicehq/sluice/lua"
)

// call is one decision waiting for its batch. Calls are pooled: a call goes
// back to callPool only after its caller has received from done, when no
// batch refers to it any more.
type call struct {
	ctx    context.Context
	script *lua.Script
	tenant string
	enc    *encoded
	reply  any
	err    error
	done   chan struct{} // one value per use, sent when reply and err are set
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

// batcher shares round trips between concurrent decisions (group commit,
// internal/groupcommit): a decision that finds fewer than maxPipes round
// trips in flight is sent at once by its own caller, as a one-decision
// EVALSHA; decisions arriving while all are busy queue, and the next round
// trip carries up to maxBatch of them: one EVALSHA per group of decisions
// that may share a script call (those of one script, and on a cluster or
// ring of one tenant, whose keys share a hash slot; see lua/admit.lua), all in
// one pipeline. So a lone caller pays no hand-off, and under load each round
// trip carries as many decisions as arrived during the previous one. No
// goroutine outlives the queued work.
type batcher struct {
	a *Admitter
	// anyTenant: decisions of different tenants may share a script call
	// (a standalone Redis, where keys need not share a hash slot).
	anyTenant bool
	queue     groupcommit.Group[*call]
}

func newBatcher(a *Admitter, maxBatch, maxPipes int, anyTenant bool) *batcher {
	b := &batcher{a: a, anyTenant: anyTenant}
	// No Timeout: the client's read and write timeouts bound a round trip.
	b.queue = groupcommit.Group[*call]{MaxFlushes: max(1, maxPipes), MaxBatch: max(1, maxBatch), Flush: b.flush}
	return b
}

// do decides one request within a batch and returns its reply element.
func (b *batcher) do(ctx context.Context, s *lua.Script, tenant string, e *encoded) (any, error) {
	c := callPool.Get().(*call)
	c.ctx, c.script, c.tenant, c.enc = ctx, s, tenant, e
	// Sent inline, the caller waits for its round trip even if its ctx ends
	// meanwhile (bounded by the client's timeouts); done then holds the
	// answer already.
	b.queue.Do(ctx, c)
	if err := groupcommit.Wait(ctx, c.done); err != nil {
		return nil, err // c is answered later and left to the GC
	}
	reply, err := c.reply, c.err
	*c = call{done: c.done}
	callPool.Put(c)
	return reply, err
}

// flush answers at once the calls whose caller has already given up, and
// sends the others in one round trip.
func (b *batcher) flush(_ context.Context, calls []*call) {
	live := calls[:0] // calls is this flush's own slice
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			c.done <- struct{}{}
			continue
		}
		live = append(live, c)
	}
	b.exec(live)
}

// exec sends batch in one round trip and answers every call in it.
func (b *batcher) exec(batch []*call) {
	if len(batch) == 0 {
		return
	}
	b.a.metrics.batchSize.Observe(float64(len(batch)))
	if len(batch) == 1 {
		// A lone decision needs no pipeline: one EVALSHA under its caller's
		// ctx, as unbatched.
		c := batch[0]
		c.reply, c.err = b.a.run(c.ctx, c.script, c.enc)
		c.done <- struct{}{}
		return
	}
	// The pipeline carries many callers' decisions, so no single caller's
	// cancellation may abort it; the client's read and write timeouts bound
	// it, and every caller still returns when its own ctx ends.
	b.pipeline(context.Background(), batch)
	for _, c := range batch {
		c.done <- struct{}{}
	}
}

// pipeline sends batch in one round trip (lua.Exec, with its NOSCRIPT
// rule), one script call per group (see group), and stores each call's
// reply or error.
func (b *batcher) pipeline(ctx context.Context, batch []*call) {
	groups := b.group(batch)
	calls := make([]lua.Call, len(groups))
	encs := make([][]*encoded, len(groups)) // per group, over one backing array
	all := make([]*encoded, 0, len(batch))
	for i, g := range groups {
		for _, c := range g {
			all = append(all, c.enc)
		}
		encs[i] = all[len(all)-len(g):]
		calls[i] = admitCall(g[0].script, encs[i])
	}
	cmds := lua.Exec(ctx, b.a.rdb, calls, nil)
	answers := make([]answer, len(batch))
	for i, g := range groups {
		reply, err := cmds[i].Result()
		if err == nil {
			err = splitReply(g[0].script, reply, encs[i], answers[:len(g)])
		}
		for j, c := range g {
			c.reply, c.err = nil, err
			if err == nil {
				c.reply, c.err = answers[j].reply, answers[j].err
			}
		}
	}
}

// group splits batch, in order, into the calls that may share one script
// call: those running the same script at the same explicit instant (or
// Redis TIME) and, unless anyTenant, of the same tenant. A tenant's calls so
// stay in their order within one group.
func (b *batcher) group(batch []*call) [][]*call {
	type key struct {
		s      *lua.Script
		tenant string
		now    int64
	}
	index := make(map[key]int, 4)
	var groups [][]*call
	for _, c := range batch {
		k := key{c.script, c.tenant, c.enc.now}
		if b.anyTenant {
			k.tenant = ""
		}
		i, ok := index[k]
		if !ok {
			i = len(groups)
			index[k] = i
			groups = append(groups, make([]*call, 0, len(batch)))
		}
		groups[i] = append(groups[i], c)
	}
	return groups
}
