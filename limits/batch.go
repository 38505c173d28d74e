package limits

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// call is one decision waiting for its batch.
type call struct {
	ctx   context.Context
	keys  []string
	args  []any
	reply any
	err   error
	done  chan struct{}
}

// batcher shares round trips between concurrent decisions. A decision joins
// a queue; when fewer than maxPipes pipelines are in flight, its caller
// becomes a flusher: it takes up to maxBatch queued decisions and sends them
// as one pipeline of EVALSHAs. Decisions arriving meanwhile queue up and go
// together in the next pipeline, sent by a goroutine the flusher starts
// before returning, which runs until the queue is empty. So a lone caller
// pays no hand-off, and under load each round trip carries as many decisions
// as arrived during the previous one. No goroutine outlives the queued work.
type batcher struct {
	a        *Admitter
	maxBatch int
	maxPipes int

	mu    sync.Mutex
	queue []*call
	pipes int // flushers running (caller or goroutine)
}

// do runs one EVALSHA of the admission script within a batch and returns its
// reply.
func (b *batcher) do(ctx context.Context, keys []string, args []any) (any, error) {
	c := &call{ctx: ctx, keys: keys, args: args, done: make(chan struct{})}
	b.mu.Lock()
	b.queue = append(b.queue, c)
	lead := b.pipes < b.maxPipes
	if lead {
		b.pipes++
	}
	b.mu.Unlock()
	if lead {
		// The caller flushes inline and so waits for this round trip even if
		// its ctx ends meanwhile (bounded by the client's timeouts).
		b.exec(b.take())
		b.mu.Lock()
		if len(b.queue) > 0 {
			go b.flush() // hands its pipeline slot on
		} else {
			b.pipes--
		}
		b.mu.Unlock()
	}
	select {
	case <-c.done:
		return c.reply, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// flush sends batches until the queue is empty, then frees its slot.
func (b *batcher) flush() {
	for {
		batch := b.take()
		if batch == nil {
			b.mu.Lock()
			if len(b.queue) == 0 {
				b.pipes--
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			continue
		}
		b.exec(batch)
	}
}

// take removes up to maxBatch calls from the queue, answering at once those
// whose caller has already given up.
func (b *batcher) take() []*call {
	b.mu.Lock()
	n := min(len(b.queue), b.maxBatch)
	batch := make([]*call, 0, n)
	for _, c := range b.queue[:n] {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		batch = append(batch, c)
	}
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	return batch
}

// exec sends batch as one pipeline; calls answered NOSCRIPT are sent again
// after the script is reloaded. It answers every call in batch.
func (b *batcher) exec(batch []*call) {
	if len(batch) == 0 {
		return
	}
	b.a.metrics.batchSize.Observe(float64(len(batch)))
	// The pipeline carries many callers' decisions, so no single caller's
	// cancellation may abort it; the client's read and write timeouts bound
	// it, and every caller still returns when its own ctx ends.
	ctx := context.Background()
	retry := b.pipeline(ctx, batch)
	if len(retry) > 0 {
		if err := b.a.reload(ctx); err != nil {
			for _, c := range retry {
				c.err = err
			}
		} else {
			b.pipeline(ctx, retry) // a second NOSCRIPT stays the call's error
		}
	}
	for _, c := range batch {
		close(c.done)
	}
}

// pipeline runs one EVALSHA per call in one round trip, stores each reply,
// and returns the calls Redis answered NOSCRIPT.
func (b *batcher) pipeline(ctx context.Context, batch []*call) []*call {
	pipe := b.a.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	sha := b.a.script.SHA()
	for i, c := range batch {
		cmds[i] = pipe.EvalSha(ctx, sha, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // errors are read per command below
	var noscript []*call
	for i, c := range batch {
		c.reply, c.err = cmds[i].Result()
		if lua.IsNoScript(c.err) {
			noscript = append(noscript, c)
		}
	}
	return noscript
}
