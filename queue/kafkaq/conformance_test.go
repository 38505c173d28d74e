package kafkaq_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestConformance runs the queue conformance suite on the Kafka backend,
// each case on its own one-partition topic and group. A consumer "dies" by
// leaving the group without settling its claims; the next member reads
// from the last commit.
func TestConformance(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, func(t *testing.T, tenants ...string) *queuetest.Backend {
		e := newKafkaEnv(t, 1)
		cfg := e.consumerConfig()
		cfg.Tenants = tenants
		cfg.RevokeTimeout = 200 * time.Millisecond
		c, stop := e.consumer(cfg, nil)
		return &queuetest.Backend{
			Producer: e.produce, Consumer: c, Redis: e.rdb,
			Redeliver: func(t *testing.T) queue.Consumer {
				stop()
				next, _ := e.consumer(cfg, nil)
				return next
			},
			DeadLetters: func(t *testing.T, tenant string) []queue.DeadLetter {
				var out []queue.DeadLetter
				for _, m := range e.readAll(cfg.Kafka.DLQTopic, 1) {
					var d queue.DeadLetter
					if err := json.Unmarshal(m.Value, &d); err != nil {
						t.Fatalf("dead letter %q: %v", m.Value, err)
					}
					if string(m.Key) == tenant {
						out = append(out, d)
					}
				}
				return out
			},
		}
	})
}
