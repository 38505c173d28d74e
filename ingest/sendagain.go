package ingest

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/lua"
)

// sendAgainEvery is how often an idempotency write that got no reply is
// sent again, and sendAgainFor how long: the pending markers' own life,
// after which the write no longer matters.
const (
	sendAgainEvery = 500 * time.Millisecond
	sendAgainFor   = pendingTTL
)

// sendAgain sends write again, every sendAgainEvery for at most
// sendAgainFor, while it gets no reply (lua.NoReply; err is its first
// failure, an error reply is not sent again). Each write so sent is safe to
// repeat: a stored answer is the same SET again, and a release or an
// unknown record writes only keys this request still holds (idemWrite).
// Before, a write lost to a Redis blip was given up: a release left the ids
// held for pendingTTL (409s for a minute), and a stored answer or unknown
// record left the marker to lapse, after which the client's retry queued
// the job a second time.
//
// At most sendAgainMax writes wait at once (a long outage under load would
// otherwise start one goroutine per request); one beyond is given up, as
// all were before. A closed client ends them.
func (s *Server) sendAgain(err error, write func(context.Context) error) {
	if !lua.NoReply(err) || errors.Is(err, redis.ErrClosed) {
		return
	}
	select {
	case sendAgainSlots <- struct{}{}:
	default:
		return
	}
	go func() {
		defer func() { <-sendAgainSlots }()
		until := time.Now().Add(sendAgainFor)
		for time.Now().Before(until) {
			time.Sleep(sendAgainEvery)
			ctx, cancel := context.WithTimeout(context.Background(), s.snap.Load().redisTimeout)
			err := write(ctx)
			cancel()
			if !lua.NoReply(err) || errors.Is(err, redis.ErrClosed) {
				return
			}
		}
	}()
}

// sendAgainMax bounds the writes sendAgain holds at once, per process.
const sendAgainMax = 1024

var sendAgainSlots = make(chan struct{}, sendAgainMax)
