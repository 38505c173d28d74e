package lua

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultWaitTimeout is Wait.Timeout's default (redis.wait_timeout).
const DefaultWaitTimeout = 100 * time.Millisecond

// ErrWaitShort wraps the error of ExecWait when fewer replicas than
// Wait.Replicas acknowledged the calls' writes within Wait.Timeout, or the
// WAIT itself failed: the writes are on the primary, not known to be on a
// replica.
var ErrWaitShort = errors.New("lua: fewer replicas acknowledged the writes than redis.wait_replicas")

// Wait is a Redis WAIT after a durable write (redis.wait_replicas,
// redis.wait_timeout): the write then survives a failover to one of the
// replicas that acknowledged it, which a write the primary had not yet
// streamed does not (asynchronous replication loses the last writes of a
// primary that dies). WAIT holds only the replicas' memory, not their disk
// (their AOF fsyncs every second, as the primary's).
type Wait struct {
	// Replicas is how many replicas must acknowledge; 0 does not wait.
	Replicas int
	// Timeout bounds the WAIT (default DefaultWaitTimeout). It must stay
	// below the client's read timeout, which bounds the pipeline.
	Timeout time.Duration
}

// ExecWait is ExecThen with WAIT w.Replicas w.Timeout as the then: one
// round trip, the WAIT on the calls' connection after them (and again after
// a NOSCRIPT retry), so it covers their writes. It returns the calls'
// commands and nil when w.Replicas is 0 (then it is Exec) or enough
// replicas acknowledged, else an error wrapping ErrWaitShort. The calls'
// own errors are their commands'; a failed call wrote nothing to wait for,
// but the WAIT's answer is the same for every call of the round trip.
func ExecWait(ctx context.Context, rdb redis.UniversalClient, calls []Call, w Wait) ([]*redis.Cmd, error) {
	if w.Replicas <= 0 {
		return Exec(ctx, rdb, calls, nil), nil
	}
	if w.Timeout <= 0 {
		w.Timeout = DefaultWaitTimeout
	}
	var wait *redis.Cmd
	cmds := ExecThen(ctx, rdb, calls, func(p redis.Pipeliner) {
		wait = p.Do(ctx, "WAIT", w.Replicas, w.Timeout.Milliseconds())
	})
	n, err := wait.Int64()
	switch {
	case err != nil:
		return cmds, fmt.Errorf("%w: WAIT %d %d: %w", ErrWaitShort, w.Replicas, w.Timeout.Milliseconds(), err)
	case n < int64(w.Replicas):
		return cmds, fmt.Errorf("%w: WAIT %d %d answered %d", ErrWaitShort, w.Replicas, w.Timeout.Milliseconds(), n)
	}
	return cmds, nil
}
