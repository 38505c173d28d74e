package kafkaq

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestKafkaProducerSharesRequestsAcrossPartitions starts 240 single-job
// calls at once over 48 tenants on a 12-partition topic (one broker) and
// checks that the partitions shared produce requests: fewer requests than
// partitions written, where one request per partition (each partition's own
// group commit) needs at least one each. Every job is then read back once,
// on its tenant's partition.
func TestKafkaProducerSharesRequestsAcrossPartitions(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	const partitions, calls, tenantCount = 12, 240, 48
	cfg := kafkaTestConfig(t, brokers, partitions)
	p := newTestKafkaProducer(t, cfg, nil)
	tenants := make([]string, tenantCount)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("share-%02d", i)
	}
	parts := make([]int, partitions)
	for i := range parts {
		parts[i] = i
	}
	burst := func(round string) (used map[int]bool) {
		used = map[int]bool{}
		jobs := make([]queue.Envelope, calls)
		for i := range jobs {
			tenant := tenants[i%tenantCount]
			used[kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: []byte(tenant)}, parts...)] = true
			jobs[i] = queuetest.Job(tenant, fmt.Sprintf("%s-%d", round, i), 1)
		}
		enqueueAtOnce(t, p, jobs)
		return used
	}
	burst("warm") // dials the broker
	p.sender.requests.Store(0)
	p.sender.messages.Store(0)
	used := burst("measured")
	requests, messages := p.sender.requests.Load(), p.sender.messages.Load()
	t.Logf("%d calls over %d partitions: %d produce requests, %d messages", calls, len(used), requests, messages)
	if messages != calls {
		t.Errorf("producer sent %d messages, want %d", messages, calls)
	}
	if requests >= int64(len(used)) {
		t.Errorf("%d produce requests for %d partitions written, want fewer (partitions share requests)", requests, len(used))
	}

	got := readTopic(t, brokers, cfg.Topic, partitions)
	seen := map[string]int{}
	for part, msgs := range got {
		for _, m := range msgs {
			seen[string(m.Key)+"/"+header(m, HeaderJobID)]++
			if want := (kafka.Murmur2Balancer{}).Balance(kafka.Message{Key: m.Key}, parts...); part != want {
				t.Errorf("tenant %s's job on partition %d, want %d", m.Key, part, want)
			}
		}
	}
	for i := range calls {
		for _, round := range []string{"warm", "measured"} {
			key := tenants[i%tenantCount] + "/" + fmt.Sprintf("%s-%d", round, i)
			if seen[key] != 1 {
				t.Errorf("job %s read %d times, want once", key, seen[key])
			}
		}
	}
}

// TestKafkaSharedRequestFallsBackToOwnRequests: a shared request the
// transport refuses as a whole (here it names a partition the topic lacks,
// as a leader map older than the transport's would name a moved one) sends
// each of its partitions again alone, so the partition that exists is
// written and only the other fails, with its own error.
func TestKafkaSharedRequestFallsBackToOwnRequests(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	cfg := kafkaTestConfig(t, brokers, 2)
	p := newTestKafkaProducer(t, cfg, nil)
	s := p.sender
	real := *s.leaders.Load()
	s.setLeaders(append(real, real[0])) // partition 2 on partition 0's broker: no such partition

	msg := func(id string) []message {
		return []message{{call: &producerCall{}, key: []byte("fallback"), value: []byte(`{"id":"` + id + `"}`),
			headers: []kafka.Header{{Key: HeaderJobID, Value: []byte(id)}}}}
	}
	deadline := time.Now().Add(10 * time.Second)
	q := s.leaderQueue(0)
	q.mu.Lock()
	q.busy = true // a request in flight: the two calls below wait in pending together
	q.mu.Unlock()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, part := range []int{0, 2} {
		wg.Go(func() { errs[i] = s.produceShared(deadline, part, msg(fmt.Sprintf("p%d", part))) })
	}
	testenv.WaitFor(t, 10*time.Second, "two partitions waiting for a shared request", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return len(q.pending) == 2
	})
	// The request "in flight" ends: the next caller finds the queue free,
	// sends its own request, then hands pending (partitions 0 and 2) on.
	q.mu.Lock()
	q.busy = false
	q.mu.Unlock()
	errs[2] = s.produceShared(deadline, 1, msg("p1"))
	wg.Wait()

	if errs[0] != nil || errs[2] != nil {
		t.Fatalf("partitions 0 and 1: %v, %v; want both written", errs[0], errs[2])
	}
	if errs[1] == nil || errors.Is(errs[1], errRegroup) {
		t.Fatalf("partition 2: %v; want its own error from a request of its own", errs[1])
	}
	got := readTopic(t, brokers, cfg.Topic, 2)
	for part, id := range map[int]string{0: "p0", 1: "p1"} {
		if len(got[part]) != 1 || header(got[part][0], HeaderJobID) != id {
			t.Errorf("partition %d holds %d messages, want the one job %s", part, len(got[part]), id)
		}
	}
}
