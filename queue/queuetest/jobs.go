package queuetest

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// Job returns a job of tenant with id and cost, type "email" and a small
// JSON payload naming id, as a test hands it to a Producer.
func Job(tenant, id string, cost int64) queue.Envelope {
	return queue.Envelope{ID: id, Tenant: tenant, Type: "email", Cost: cost, Payload: json.RawMessage(`{"n":"` + id + `"}`)}
}

// Stored returns jobs as a producer stores them when its clock reads now:
// version and enqueued_at set.
func Stored(now time.Time, jobs ...queue.Envelope) []queue.Envelope {
	out := make([]queue.Envelope, len(jobs))
	for i, e := range jobs {
		e.Version = queue.EnvelopeVersion
		e.EnqueuedAt = now
		out[i] = e
	}
	return out
}

// CountTo returns a no-op delivery function (a drainer.Handler's Handle)
// that counts its calls, and a channel closed at the nth.
func CountTo(n int) (func(context.Context, queue.Envelope) error, <-chan struct{}) {
	var mu sync.Mutex
	done := 0
	all := make(chan struct{})
	return func(context.Context, queue.Envelope) error {
		mu.Lock()
		defer mu.Unlock()
		if done++; done == n {
			close(all)
		}
		return nil
	}, all
}
