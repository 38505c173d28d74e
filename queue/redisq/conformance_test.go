package redisq

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestConformance runs the queue conformance suite on the Redis backend.
// A consumer "dies" by its leases being reaped at an instant past them.
func TestConformance(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, func(t *testing.T, tenants ...string) *queuetest.Backend {
		rdb := testenv.Redis(t)
		t.Cleanup(func() {
			for _, tn := range tenants {
				rdb.Del(context.Background(), keys.Queue(tn), keys.Backlog(tn), keys.Processing(tn), keys.Leased(tn),
					keys.Delayed(tn), keys.JobIndex(tn, "dead"), keys.DeadRecords(tn), keys.JobSeq(tn), keys.JobsDispatched(tn))
			}
		})
		p, err := NewProducer(ProducerConfig{Redis: rdb, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		cfg := ConsumerConfig{Redis: rdb, Lease: 30 * time.Second, Poll: 20 * time.Millisecond, Tenants: tenants}
		c := newTestConsumer(t, cfg)
		return &queuetest.Backend{
			Producer: p, Consumer: c, Redis: rdb,
			Redeliver: func(t *testing.T) queue.Consumer {
				after := time.Now().Add(cfg.Lease + time.Second).UnixMilli()
				for _, tn := range tenants {
					if _, err := c.reapAt(context.Background(), tn, after); err != nil {
						t.Fatal(err)
					}
				}
				return newTestConsumer(t, cfg)
			},
			DeadLetters: func(t *testing.T, tenant string) []queue.DeadLetter {
				recs, err := dlq.Letters(context.Background(), rdb, tenant)
				if err != nil {
					t.Fatal(err)
				}
				out := make([]queue.DeadLetter, len(recs))
				for i := range recs {
					out[i] = recs[len(recs)-1-i].DeadLetter
				}
				return out
			},
		}
	})
}
