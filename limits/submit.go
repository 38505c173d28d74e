package limits

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// Then is what the submit script (lua/submit.lua) does after a request is
// admitted: its share of the call after the admission layout, opaque to
// this package. The Redis queue backend builds it (redisq.Producer.Then):
// the enqueue's keys and arguments, all of the request's tenant (one
// cluster slot with its admission keys).
type Then struct {
	Keys []string
	Args []any
}

// Submitted is the answer to Submit: the admission Decision and, when
// Allowed, what the enqueue left.
type Submitted struct {
	Decision
	// QueueLength and Backlog are the tenant's queue length and backlog
	// after the enqueue (0 when refused).
	QueueLength, Backlog int64
}

// submitReplyExtra is what submit.lua adds to each decision's admission
// integers: the queue length and the backlog after the enqueue.
const submitReplyExtra = 2

// Submit decides r and, only when it is admitted, runs then in the same
// script call (lua.Submit, or the one-module lua.SubmitFor): one EVALSHA,
// all or nothing, sharing round trips and script calls with concurrent
// Submits as Admit does with Admits. r may not be a dry run. An error
// wrapping ErrInvalidRequest means nothing was sent; any other error is
// Redis' or a malformed reply, after which the call may or may not have run.
func (a *Admitter) Submit(ctx context.Context, r Request, then Then) (Submitted, error) {
	if r.DryRun {
		return Submitted{}, fmt.Errorf("limits: submit %s: %w: a dry run", r.Tenant, ErrInvalidRequest)
	}
	if len(then.Keys) == 0 || len(then.Args) == 0 {
		return Submitted{}, fmt.Errorf("limits: submit %s: %w: nothing to run after admission", r.Tenant, ErrInvalidRequest)
	}
	e := new(encoded)
	if err := a.encode(r, e); err != nil {
		return Submitted{}, err
	}
	e.thenBuf = then
	e.then = &e.thenBuf
	s := a.submitFor(r)
	var (
		reply any
		err   error
	)
	if a.batch != nil {
		reply, err = a.batch.do(ctx, s, r.Tenant, e)
	} else {
		reply, err = a.run(ctx, s, e)
	}
	if err != nil {
		return Submitted{}, fmt.Errorf("limits: submit %s: %w", r.Tenant, err)
	}
	return decodeSubmit(s, r, reply)
}

// submitFor is scriptFor's submit script: lua.SubmitFor of the one
// algorithm of r's policies, else lua.Submit.
func (a *Admitter) submitFor(r Request) *lua.Script {
	return pick(r, a.submit, a.submitSingle)
}

// decodeSubmit checks a submit.lua decision's reply: the admission integers
// (decode), then the queue length and backlog.
func decodeSubmit(s *lua.Script, r Request, reply any) (Submitted, error) {
	want := 3 + 5*len(r.Policies) + submitReplyExtra
	arr, err := s.Array(reply, want, want)
	if err != nil {
		return Submitted{}, fmt.Errorf("limits: submit %s: %w", r.Tenant, err)
	}
	d, err := decode(s, r, arr[:want-submitReplyExtra])
	if err != nil {
		return Submitted{}, err
	}
	out := Submitted{Decision: d}
	if out.QueueLength, err = s.Int(arr[want-2], "queue length"); err == nil {
		out.Backlog, err = s.Int(arr[want-1], "backlog")
	}
	if err != nil {
		return Submitted{}, fmt.Errorf("limits: submit %s: %w", r.Tenant, err)
	}
	return out, nil
}

// Redis is the client the Admitter decides on (AdmitterConfig.Redis): a
// caller joining its own writes to Submit checks that they go to the same
// Redis.
func (a *Admitter) Redis() redis.UniversalClient { return a.rdb }
