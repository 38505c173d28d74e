package kafkaq

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"

	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// This file holds the Kafka producer's batching: one queue of batches per
// partition with at most one produce request in flight; the jobs that arrive
// meanwhile wait in the partition's queue and leave together in the next
// request ("group commit", as the Java client batches while its requests are
// in flight). Under load each request carries everything that arrived during
// the previous one, so the batch size follows the load. A partition whose
// last request carried a single call's jobs sends the next job at once; one
// whose last request was shared first waits the linger
// (Settings.BatchTimeout) for more. The partitions led by one broker share
// its produce requests (leader.go). See docs/adr/0003-queue-producers.md.

// message is one job on its way to a partition. key is the tenant; job is
// the envelope (its id, type and enqueued_at go to the job's state record
// after the ack).
type message struct {
	call    *producerCall
	cost    int64
	key     []byte
	value   []byte
	headers []kafka.Header
	job     *queue.Envelope
}

// producerCall is one Enqueue call. abandoned is set when the call returned
// an error before its batches completed; the sender then leaves its jobs out of
// any request not yet sent, so a job whose caller was told "not queued" is
// not written later when that can still be avoided.
type producerCall struct {
	abandoned atomic.Bool
}

// produceBatch is the jobs one produce request carries to one partition.
// err is written before done is closed and read only after.
type produceBatch struct {
	msgs    []message
	bytes   int
	done    chan struct{}
	err     error
	lastErr atomic.Pointer[error] // the last failed try, while retrying
	acked   atomic.Bool           // the broker acknowledged; done follows once counted
	sent    atomic.Bool           // a produce request carried it: it may be in the topic
}

// batchQueue is one partition's queue of batches. The head is sent next
// (or is in flight); new jobs join the tail while it has room.
type batchQueue struct {
	partition int
	mu        sync.Mutex
	queue     []*produceBatch
	busy      bool // a drain goroutine sends queue
	shared    bool // the last request carried more than one call's jobs
}

// sender owns the batch queues of one topic's partitions and sends their
// batches.
type sender struct {
	client     *kafka.Client
	transport  *kafka.Transport
	topic      string
	timeout    time.Duration // bounds one batch, retries included
	linger     time.Duration // wait for company before a busy period's first send, after a shared request
	maxBytes   int           // bytes of one request's records
	backoffMin time.Duration
	backoffMax time.Duration
	batchJobs  prometheus.Observer
	backlog    *backlog // nil: no backlog counters

	leaders  atomic.Pointer[[]int] // broker id leading each partition (setLeaders)
	leaderMu sync.Mutex
	byLeader map[int]*leaderQueue

	mu     sync.Mutex
	queues map[int]*batchQueue
	closed bool
	wg     sync.WaitGroup

	requests atomic.Int64 // produce requests sent, retries included
	messages atomic.Int64 // jobs in those requests
}

// newSender returns a sender to k.Topic on a client of its own, with no
// backlog counters.
func newSender(k Settings, reg prometheus.Registerer) (*sender, error) {
	batchJobs, err := metrics.Register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_kafka_produce_batch_jobs",
		Help:    "Jobs per Kafka produce request (concurrent Enqueue calls share requests).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
	}))
	if err != nil {
		return nil, err
	}
	transport := &kafka.Transport{
		DialTimeout: min(time.Second, k.ProduceTimeout), MetadataTTL: metadataTTL,
		MetadataTopics: []string{k.Topic}, ClientID: "sluice-producer",
	}
	return &sender{
		client:    &kafka.Client{Addr: kafka.TCP(k.Brokers...), Transport: transport, Timeout: k.ProduceTimeout},
		transport: transport, topic: k.Topic, timeout: k.ProduceTimeout, linger: k.BatchTimeout,
		maxBytes: maxRequestBytes, backoffMin: backoffMin, backoffMax: backoffMax,
		batchJobs: batchJobs, queues: map[int]*batchQueue{},
	}, nil
}

// msgSize estimates the bytes m takes in a record batch.
func msgSize(m *message) int {
	n := len(m.key) + len(m.value) + 24
	for _, h := range m.headers {
		n += len(h.Key) + len(h.Value) + 4
	}
	return n
}

// add puts msgs, all for partition, in that partition's batch queue and
// returns the batches they joined (usually one). It starts the queue's
// drain when the queue was idle. It returns false when the sender is
// closed.
func (s *sender) add(partition int, msgs []message) ([]*produceBatch, bool) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false
	}
	l := s.queues[partition]
	if l == nil {
		l = &batchQueue{partition: partition}
		s.queues[partition] = l
	}
	l.mu.Lock()
	start := !l.busy
	if start {
		l.busy = true
		s.wg.Add(1)
	}
	s.mu.Unlock()

	var joined []*produceBatch
	for i := range msgs {
		size := msgSize(&msgs[i])
		var tail *produceBatch
		if n := len(l.queue); n > 0 {
			tail = l.queue[n-1]
		}
		// The sender takes a batch out of queue before sending it, so every
		// batch still in queue may take more jobs.
		if tail == nil || (len(tail.msgs) > 0 && tail.bytes+size > s.maxBytes) {
			tail = &produceBatch{done: make(chan struct{})}
			l.queue = append(l.queue, tail)
		}
		tail.msgs = append(tail.msgs, msgs[i])
		tail.bytes += size
		if len(joined) == 0 || joined[len(joined)-1] != tail {
			joined = append(joined, tail)
		}
	}
	l.mu.Unlock()
	if start {
		go s.drain(l)
	}
	return joined, true
}

// drain sends the queue's batches one at a time until the queue is empty.
// When the partition's last request was shared by several calls
// (concurrent load), it first waits s.linger for more jobs to join; a lone
// caller on a quiet partition is sent at once.
func (s *sender) drain(l *batchQueue) {
	defer s.wg.Done()
	l.mu.Lock()
	linger := s.linger > 0 && l.shared
	l.mu.Unlock()
	if linger {
		time.Sleep(s.linger)
	}
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.busy = false
			l.mu.Unlock()
			return
		}
		b := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		l.mu.Unlock()

		shared := len(b.msgs) > 1 && b.msgs[0].call != b.msgs[len(b.msgs)-1].call
		sent, err := s.send(l.partition, b)
		if err == nil && len(sent) > 0 && s.backlog != nil {
			// The callers wait for their counters, the partition does not:
			// its next request goes out while Redis is written.
			b.acked.Store(true)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.backlog.add(sent)
				close(b.done)
			}()
		} else {
			b.err = err
			close(b.done)
		}
		l.mu.Lock()
		l.shared = shared
		l.mu.Unlock()
	}
}

// send produces b's jobs to partition with acks=all, leaving out the jobs
// of abandoned calls, and retries errors that may pass (a leader moving, a
// connection refused or reset, a stale metadata cache) with backoff
// attempt² × backoffMin capped at backoffMax, until s.timeout has passed
// since the first try. It returns the jobs the acknowledged request
// carried.
func (s *sender) send(partition int, b *produceBatch) ([]message, error) {
	deadline := time.Now().Add(s.timeout)
	for attempt := 0; ; attempt++ {
		msgs := b.msgs
		for i := range msgs {
			if msgs[i].call.abandoned.Load() {
				msgs = waiting(msgs)
				break
			}
		}
		if len(msgs) == 0 {
			return nil, nil // nobody waits for these jobs any more
		}
		b.sent.Store(true)
		err := s.produceShared(deadline, partition, msgs)
		if err == nil {
			return msgs, nil
		}
		b.lastErr.Store(&err)
		pause := min(time.Duration((attempt+1)*(attempt+1))*s.backoffMin, s.backoffMax)
		if !retriable(err) || time.Until(deadline) < pause {
			return nil, err
		}
		time.Sleep(pause)
	}
}

// waiting returns the jobs of msgs whose call still waits, in a new slice.
func waiting(msgs []message) []message {
	out := make([]message, 0, len(msgs))
	for _, m := range msgs {
		if !m.call.abandoned.Load() {
			out = append(out, m)
		}
	}
	return out
}

// retriable reports whether a produce error may pass on its own: a Kafka
// error the protocol marks temporary (NotLeaderOrFollower,
// LeaderNotAvailable, RequestTimedOut, NotEnoughReplicas...), a refused,
// reset or cut connection (the Writer's rule), or the transport's metadata
// cache not knowing the partition's leader yet (it is refreshed every
// MetadataTTL).
func retriable(err error) bool {
	var temp interface{ Temporary() bool }
	if errors.As(err, &temp) && temp.Temporary() {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, protocol.ErrNoLeader) || errors.Is(err, protocol.ErrNoPartition) ||
		errors.Is(err, protocol.ErrNoTopic)
}

// close stops taking jobs and waits until every batch queue has sent (or
// failed) what it holds.
func (s *sender) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}

// recordReader reads msgs as kafka records, reusing one record and two byte
// readers, so a request costs no allocation per job.
type recordReader struct {
	msgs       []message
	i          int
	rec        kafka.Record
	key, value byteBody
}

type byteBody struct{ bytes.Reader }

func (*byteBody) Close() error { return nil }

func (r *recordReader) ReadRecord() (*kafka.Record, error) {
	if r.i >= len(r.msgs) {
		return nil, io.EOF
	}
	m := &r.msgs[r.i]
	r.i++
	r.key.Reset(m.key)
	r.value.Reset(m.value)
	r.rec = kafka.Record{Key: &r.key, Value: &r.value, Headers: m.headers}
	return &r.rec, nil
}
