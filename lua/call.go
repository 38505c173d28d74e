package lua

import (
	"context"
	"errors"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Call is one call of a script: the script and its KEYS and ARGV. A
// script's Go twin (next to its caller) builds it from typed arguments.
type Call struct {
	Script *Script
	Keys   []string
	Args   []any
}

// Run sends the call alone: EVALSHA, and when Redis answers NOSCRIPT, the
// same call once more as EVAL, which loads the script on the node that owns
// Keys[0], so the caller never sees NOSCRIPT.
func (c Call) Run(ctx context.Context, rdb redis.Scripter) *redis.Cmd {
	cmd := rdb.EvalSha(ctx, c.Script.sha, c.Keys, c.Args...)
	if IsNoScript(cmd.Err()) {
		c.Script.reloads.Add(1)
		return rdb.Eval(ctx, c.Script.src, c.Keys, c.Args...)
	}
	return cmd
}

// Exec sends calls in one round trip, with the commands also queues (nil:
// none) in the same pipeline, and returns each call's command in the order
// of calls. The NOSCRIPT rule is Run's: the calls Redis answered NOSCRIPT
// are sent once more as EVAL, together in a second pipeline. A lone call
// with nothing else goes without a pipeline, as Run. Errors are each
// command's own; the pipeline's error is not returned (it is the first of
// them).
func Exec(ctx context.Context, rdb redis.UniversalClient, calls []Call, also func(redis.Pipeliner)) []*redis.Cmd {
	if len(calls) == 1 && also == nil {
		return []*redis.Cmd{calls[0].Run(ctx, rdb)}
	}
	return exec(ctx, rdb, calls, also, nil)
}

// ExecThen is Exec with then's commands queued after the calls, in the same
// pipeline: for a command that must follow the calls' writes on the same
// connection, such as WAIT. When calls are sent again as EVAL (NOSCRIPT),
// then is queued once more after them in that second pipeline, so the
// commands it queued last follow every write; the caller reads those.
func ExecThen(ctx context.Context, rdb redis.UniversalClient, calls []Call, then func(redis.Pipeliner)) []*redis.Cmd {
	return exec(ctx, rdb, calls, nil, then)
}

// exec is Exec and ExecThen: before's commands, the calls, then's
// commands in one pipeline; the NOSCRIPT calls again as EVAL, followed by
// then's commands again when there is a then.
func exec(ctx context.Context, rdb redis.UniversalClient, calls []Call, before, then func(redis.Pipeliner)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if before != nil {
			before(p)
		}
		for i, c := range calls {
			cmds[i] = p.EvalSha(ctx, c.Script.sha, c.Keys, c.Args...)
		}
		if then != nil {
			then(p)
		}
		return nil
	})
	var retry []int
	for i, cmd := range cmds {
		if IsNoScript(cmd.Err()) {
			retry = append(retry, i)
		}
	}
	switch {
	case len(retry) == 0:
	case len(retry) == 1 && then == nil:
		c := calls[retry[0]]
		c.Script.reloads.Add(1)
		cmds[retry[0]] = rdb.Eval(ctx, c.Script.src, c.Keys, c.Args...)
	default:
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, i := range retry {
				c := calls[i]
				c.Script.reloads.Add(1)
				cmds[i] = p.Eval(ctx, c.Script.src, c.Keys, c.Args...)
			}
			if then != nil {
				then(p)
			}
			return nil
		})
	}
	return cmds
}

// Flag is a boolean script argument: "1" or "0".
func Flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// MayHaveRun reports whether a script that failed with err may still have
// run: not when Redis answered with an error (the script refused its
// arguments before writing, or Redis refused it: LOADING, READONLY...), nor
// when the command never left (NeverSent); otherwise (a timeout, a cut
// connection, a reply of the wrong shape) it may.
func MayHaveRun(err error) bool {
	var rerr redis.Error
	return !errors.As(err, &rerr) && !NeverSent(err)
}

// NoReply reports whether err shows that no reply came for a call: it
// never left (NeverSent), or the connection failed or timed out before
// Redis answered, so the call may or may not have run. Sending it again is
// the way to learn its outcome, for a script that tells a second send of
// one call from a first (kafka_finish.lua's fin mark). Not for an error
// reply (Redis answered; it repeats) nor a reply of the wrong shape
// (ErrReply: the script ran).
func NoReply(err error) bool {
	return err != nil && !errors.Is(err, ErrReply) && (NeverSent(err) || MayHaveRun(err))
}

// NeverSent reports whether err shows that the command never reached Redis
// (no connection could be made, the pool had none, the client is closed),
// so sending it again cannot apply it twice. An error reply is not one:
// Redis got the command, and a script may have written before it failed.
func NeverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}
