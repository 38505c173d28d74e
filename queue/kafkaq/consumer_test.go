package kafkaq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// TestKafkaConsumerDrainsEveryJob produces jobs of five tenants on three
// partitions and drains them with the real drainer: every job is delivered
// once, every backlog counter returns to 0, and the committed offsets reach
// the end of every partition.
func TestKafkaConsumerDrainsEveryJob(t *testing.T) {
	t.Parallel()
	const partitions, perTenant = 3, 60
	e := newKafkaEnv(t, partitions)
	tenants := map[string]config.Tenant{}
	for i := 0; i < 5; i++ {
		tn := testenv.Name(t, "kc"+strconv.Itoa(i))
		tenants[tn] = config.Tenant{}
		e.enqueue(tn, 0, perTenant)
	}
	got := newDeliveries()
	c, stopConsumer := e.consumer(e.consumerConfig(), nil)
	stop := runDrainer(t, c, e.rdb, tenants, drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		got.add(job.ID)
		return nil
	}))
	want := len(tenants) * perTenant
	testenv.WaitFor(t, 15*time.Second, "every job delivered", func() bool { u, _ := got.counts(); return u == want })
	ends := e.endOffsets(e.cfg.Topic, partitions)
	testenv.WaitFor(t, 5*time.Second, "commits at the end offsets", func() bool { return cmp.Equal(ends, e.committed(partitions)) })
	stop()
	stopConsumer()
	unique, total := got.counts()
	if unique != want || total != want {
		t.Errorf("delivered %d unique in %d deliveries, want %d once each", unique, total, want)
	}
	for tn := range tenants {
		if n, err := e.rdb.Get(context.Background(), keys.Backlog(tn)).Int(); err != nil || n != 0 {
			t.Errorf("backlog of %s = %d (%v), want 0", tn, n, err)
		}
	}
}

// TestKafkaConsumerCommitsLowestUnfinished finishes jobs out of order and
// checks the committed offset is the lowest unfinished one; after a restart
// only the unfinished jobs come again (the finished ones above the offset
// are in the commit's metadata).
func TestKafkaConsumerCommitsLowestUnfinished(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "wm")
	e.enqueue(tenant, 0, 10)
	cfg := e.consumerConfig()
	cfg.RevokeTimeout = 300 * time.Millisecond // the test holds jobs claimed through the stop
	c, stop := e.consumer(cfg, nil)
	jobs := claimN(t, c, tenant, 10, 15*time.Second)
	for i, j := range jobs {
		if want := jobID(tenant, i); j.Envelope.ID != want {
			t.Fatalf("claim %d = %s, want %s (offset order)", i, j.Envelope.ID, want)
		}
	}
	committedIs := func(want int64) {
		t.Helper()
		testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("committed offset %d", want), func() bool { return e.committed(1)[0] == want })
	}
	for _, i := range []int{1, 2, 4, 5} {
		finish(t, c, jobs[i], nil)
	}
	committedIs(0)
	finish(t, c, jobs[0], nil)
	committedIs(3)
	stop()
	if got := e.committed(1)[0]; got != 3 {
		t.Fatalf("committed offset after stop = %d, want 3", got)
	}
	// The jobs still claimed when the partition was let go are lost to this
	// consumer: its next owner delivers them.
	held := []*queue.Claimed{jobs[3], jobs[6], jobs[7], jobs[8], jobs[9]}
	if lost, _ := c.Extend(context.Background(), tenant, held); len(lost) != len(held) {
		t.Errorf("Extend after the partition was let go: %d of %d lost, want all", len(lost), len(held))
	}
	if err := c.Finish(context.Background(), jobs[3], queue.Outcome{}); !errors.Is(err, queue.ErrLeaseLost) {
		t.Errorf("Finish after the partition was let go = %v, want ErrLeaseLost", err)
	}

	c2, _ := e.consumer(cfg, nil)
	var again []string
	for _, j := range claimN(t, c2, tenant, 5, 15*time.Second) {
		again = append(again, j.Envelope.ID)
	}
	claimNone(t, c2, tenant, 300*time.Millisecond)
	want := []string{jobID(tenant, 3), jobID(tenant, 6), jobID(tenant, 7), jobID(tenant, 8), jobID(tenant, 9)}
	if diff := cmp.Diff(want, again); diff != "" {
		t.Errorf("jobs delivered again after a restart (-want +got):\n%s", diff)
	}
}

// TestKafkaConsumerRebalanceLosesNothing starts a second consumer (and
// drainer) while the first is draining, and produces more jobs after the
// rebalance: every job is delivered, duplicates are counted, both members
// deliver, and the commits reach the end of every partition.
func TestKafkaConsumerRebalanceLosesNothing(t *testing.T) {
	t.Parallel()
	const partitions, nTenants, perTenant, more = 4, 8, 150, 30
	e := newKafkaEnv(t, partitions)
	tenants := map[string]config.Tenant{}
	var names []string
	for i := 0; i < nTenants; i++ {
		tn := testenv.Name(t, "rb"+strconv.Itoa(i))
		names = append(names, tn)
		// 40 jobs/s per tenant, shared by both drainers: 320/s in all, so
		// the 1,200 jobs take about 4 s and the join lands mid-run.
		tenants[tn] = config.Tenant{Outflow: config.Outflow{Rate: 40, Capacity: 5}}
		e.enqueue(tn, 0, perTenant)
	}
	got := newDeliveries()
	var byMember [2]int
	var mu sync.Mutex
	handler := func(member int) drainer.Handler {
		return drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
			got.add(job.ID)
			mu.Lock()
			byMember[member]++
			mu.Unlock()
			return nil
		})
	}
	c1, _ := e.consumer(e.consumerConfig(), nil)
	runDrainer(t, c1, e.rdb, tenants, handler(0))
	testenv.WaitFor(t, 15*time.Second, "a quarter delivered", func() bool { u, _ := got.counts(); return u >= nTenants*perTenant/4 })
	joined := time.Now()
	c2, _ := e.consumer(e.consumerConfig(), nil)
	runDrainer(t, c2, e.rdb, tenants, handler(1))
	for _, tn := range names {
		e.enqueue(tn, perTenant, perTenant+more)
	}
	want := nTenants * (perTenant + more)
	testenv.WaitFor(t, 25*time.Second, "every job delivered", func() bool { u, _ := got.counts(); return u == want })
	ends := e.endOffsets(e.cfg.Topic, partitions)
	testenv.WaitFor(t, 5*time.Second, "commits at the end offsets", func() bool { return cmp.Equal(ends, e.committed(partitions)) })
	unique, total := got.counts()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("rebalance: %d jobs, %d deliveries, %d duplicates; member 1 delivered %d, member 2 (joined mid-run) %d; all done %v after the join",
		unique, total, total-unique, byMember[0], byMember[1], time.Since(joined).Round(time.Millisecond))
	if byMember[1] == 0 {
		t.Errorf("the second member delivered nothing: no partition was moved to it")
	}
	for _, tn := range names {
		for i := 0; i < perTenant+more; i++ {
			if got.seen[jobID(tn, i)] == 0 {
				t.Errorf("job %s never delivered", jobID(tn, i))
			}
		}
	}
}

// TestKafkaConsumerDeadLetters: a job the handler refuses, a job that does
// not decode, and a message without a tenant all land on the DLQ topic with
// their reason, and their offsets are committed.
func TestKafkaConsumerDeadLetters(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	tenant := testenv.Name(t, "dlq")
	e.enqueue(tenant, 0, 3)
	ctx := context.Background()
	fresh := &kafka.Client{Addr: kafka.TCP(e.cfg.Brokers...), Transport: &kafka.Transport{}} // metadata that knows the new topic
	_, err := fresh.Produce(ctx, &kafka.ProduceRequest{
		Topic: e.cfg.Topic, Partition: 0, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(
			kafka.Record{Key: kafka.NewBytes([]byte(tenant)), Value: kafka.NewBytes([]byte(`not json`)),
				Headers: []kafka.Header{{Key: kafkaq.HeaderTenant, Value: []byte(tenant)}, {Key: kafkaq.HeaderJobID, Value: []byte("bad-json")}}},
			kafka.Record{Value: kafka.NewBytes([]byte(`{"v":1,"id":"no-tenant"}`))},
		),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.enqueue(tenant, 3, 4)
	c, _ := e.consumer(e.consumerConfig(), nil)
	delivered := newDeliveries()
	runDrainer(t, c, e.rdb, map[string]config.Tenant{tenant: {}}, drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		delivered.add(job.ID)
		if job.ID == jobID(tenant, 1) {
			return &drainer.PermanentError{Err: errReject, Status: 422, Body: `{"error":"bad address"}`}
		}
		return nil
	}))
	testenv.WaitFor(t, 15*time.Second, "commit past all 6 messages", func() bool { return e.committed(1)[0] == 6 })

	type rec struct {
		ID, Reason, Header string
		Status             int
		Response           string
	}
	var got []rec
	for _, m := range e.readAll(e.cfg.DLQTopic, 1) {
		var dl queue.DeadLetter
		if err := json.Unmarshal(m.Value, &dl); err != nil {
			t.Fatalf("dead letter %s does not decode: %v", m.Value, err)
		}
		r := rec{Reason: dl.Reason, Status: dl.Status, Response: dl.Response}
		for _, h := range m.Headers {
			switch h.Key {
			case kafkaq.HeaderJobID:
				r.ID = string(h.Value)
			case kafkaq.HeaderDLQReason:
				r.Header = string(h.Value)
			}
		}
		got = append(got, r)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].ID < got[j].ID })
	want := []rec{
		{ID: "bad-json", Reason: "poison", Header: "poison"},
		{ID: jobID(tenant, 1), Reason: "rejected", Header: "rejected", Status: 422, Response: `{"error":"bad address"}`},
		{ID: "no-tenant", Reason: "poison", Header: "poison"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dead letters (-want +got):\n%s", diff)
	}
	if u, _ := delivered.counts(); u != 4 {
		t.Errorf("handler saw %d jobs, want the 4 that decode", u)
	}
	if n, _ := e.rdb.Get(ctx, keys.Backlog(tenant)).Int(); n != 0 {
		t.Errorf("backlog = %d, want 0", n)
	}
}

// TestKafkaConsumerNoHeadOfLineBlocking: tenants A and B share the one
// partition; A has a 20,000-job backlog drained at 10 jobs/s, and B's jobs
// are produced after it. B's jobs must not wait behind A's: A's FIFO stops
// at its bound, its later jobs stay in Kafka, and the partition reader goes
// on to B's. Tolerance: B's p99 delay (produced → handler) under 1 s.
func TestKafkaConsumerNoHeadOfLineBlocking(t *testing.T) {
	e := newKafkaEnv(t, 1)
	a, b := testenv.Name(t, "hol-a"), testenv.Name(t, "hol-b")
	e.enqueue(a, 0, 20_000)
	reg := prometheus.NewRegistry()
	c, _ := e.consumer(e.consumerConfig(), reg)
	var mu sync.Mutex
	sent := map[string]time.Time{}
	var delays []time.Duration
	gotA := newDeliveries()
	runDrainer(t, c, e.rdb, map[string]config.Tenant{
		a: {Outflow: config.Outflow{Rate: 10}},
		b: {Outflow: config.Outflow{Rate: 1000}},
	}, drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		if job.Tenant == a {
			gotA.add(job.ID)
			return nil
		}
		mu.Lock()
		delays = append(delays, time.Since(sent[job.ID]))
		mu.Unlock()
		return nil
	}))
	testenv.WaitFor(t, 15*time.Second, "A flowing", func() bool { u, _ := gotA.counts(); return u >= 1 })
	// A first job of B, not measured: once it is delivered the partition
	// reader has read through A's backlog (left in Kafka past A's bound).
	probe := time.Now()
	mu.Lock()
	sent[jobID(b, 0)] = probe
	mu.Unlock()
	e.enqueue(b, 0, 1)
	testenv.WaitFor(t, 10*time.Second, "B's first job", func() bool { mu.Lock(); defer mu.Unlock(); return len(delays) == 1 })
	mu.Lock()
	readThrough := delays[0]
	delays = nil
	mu.Unlock()
	const n = 50
	for i := 1; i <= n; i++ {
		mu.Lock()
		sent[jobID(b, i)] = time.Now()
		mu.Unlock()
		e.enqueue(b, i, i+1)
		time.Sleep(10 * time.Millisecond)
	}
	testenv.WaitFor(t, 10*time.Second, "B's jobs", func() bool { mu.Lock(); defer mu.Unlock(); return len(delays) == n })
	mu.Lock()
	sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
	p50, p99 := delays[n/2], delays[n*99/100]
	mu.Unlock()
	overflows := testenv.MetricValue(t, reg, "sluice_kafka_lane_overflows_total", nil)
	t.Logf("tenant B behind A's 20,000-job backlog at 10/s on one partition: p50 %v, p99 %v; A's FIFO overflowed %v times; B's first job waited %v while the reader read through A's backlog", p50, p99, overflows, readThrough)
	if p99 > time.Second {
		t.Errorf("B's p99 delay %v behind A's backlog, want < 1s", p99)
	}
	if overflows < 1 {
		t.Errorf("A's FIFO never reached its bound (overflows %v); the test does not exercise the bound", overflows)
	}
}

// TestKafkaConsumerOverflowKeepsOrder: with a FIFO bound of 20 jobs, two
// tenants of 200 interleaved jobs each on one partition are still handed
// out whole and in offset order, through many refill reads.
func TestKafkaConsumerOverflowKeepsOrder(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	a, b := testenv.Name(t, "ord-a"), testenv.Name(t, "ord-b")
	for i := 0; i < 200; i += 10 {
		e.enqueue(a, i, i+10)
		e.enqueue(b, i, i+10)
	}
	cfg := e.consumerConfig()
	cfg.MaxTenantJobs = 20
	c, _ := e.consumer(cfg, nil)
	for _, tn := range []string{a, b} {
		var got, want []string
		for i := 0; i < 200; i++ {
			j := claimN(t, c, tn, 1, 5*time.Second)[0]
			got = append(got, j.Envelope.ID)
			want = append(want, jobID(tn, i))
			finish(t, c, j, nil)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("tenant %s order (-want +got):\n%s", tn, diff)
		}
	}
	testenv.WaitFor(t, 5*time.Second, "committed offset 400", func() bool { return e.committed(1)[0] == 400 })
}

// TestKafkaConsumerPausesAtWindowBound: one unfinished job holds the
// watermark; once MaxWindow offsets lie between it and the read position
// the partition stops fetching (paused, lag reported), and it resumes when
// the job finishes.
func TestKafkaConsumerPausesAtWindowBound(t *testing.T) {
	t.Parallel()
	e := newKafkaEnv(t, 1)
	slow, other := testenv.Name(t, "win-a"), testenv.Name(t, "win-b")
	e.enqueue(slow, 0, 1)
	for i := 0; i < 300; i += 10 {
		e.enqueue(other, i, i+10) // 30 record batches
	}
	cfg := e.consumerConfig()
	cfg.MaxWindow = 100
	reg := prometheus.NewRegistry()
	c, _ := e.consumer(cfg, reg)
	held := claimN(t, c, slow, 1, 15*time.Second)[0]
	done := 0
	for {
		j, _, err := c.Claim(context.Background(), other)
		if err != nil {
			t.Fatal(err)
		}
		if j == nil {
			break
		}
		finish(t, c, j, nil)
		done++
	}
	if done != 99 {
		t.Fatalf("finished %d of B's 300 jobs with the window (offsets 0-99) held at offset 0, want 99 before the partition pauses", done)
	}
	part := map[string]string{"topic": e.cfg.Topic, "partition": "0"}
	testenv.WaitFor(t, 3*time.Second, "paused and lag reported", func() bool {
		return testenv.MetricValue(t, reg, "sluice_kafka_partition_paused", part) == 1 && testenv.MetricValue(t, reg, "sluice_consumer_lag", part) == 301
	})
	finish(t, c, held, nil)
	for ; done < 300; done++ {
		finish(t, c, claimN(t, c, other, 1, 5*time.Second)[0], nil)
	}
	testenv.WaitFor(t, 5*time.Second, "committed offset 301", func() bool { return e.committed(1)[0] == 301 })
}
