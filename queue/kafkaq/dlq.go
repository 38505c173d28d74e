package kafkaq

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/sluicehq/sluice/queue"
)

// Headers of a dead-letter record on the Kafka DLQ topic, besides
// HeaderJobID and HeaderTenant.
const (
	// HeaderDLQReason is the queue.DeadLetter's Reason.
	HeaderDLQReason = "sluice-dlq-reason"
	// HeaderDLQSource is where the job was read: "topic/partition@offset".
	HeaderDLQSource = "sluice-dlq-source"
)

// dlqWriter writes dead-letter records to the DLQ topic, keyed by tenant
// (murmur2, as jobs are), with acks=all, one produce request per record:
// dead letters are rare, so they need no batching. Safe for concurrent use.
type dlqWriter struct {
	client  *kafka.Client
	topic   string
	parts   []int
	timeout time.Duration
}

// newDLQWriter creates cfg.DLQTopic when absent (with cfg.Partitions,
// cfg.ReplicationFactor and cfg.MinInsyncReplicas) and returns a writer to it whose writes are
// bounded by cfg.ProduceTimeout (cfg has its defaults applied).
func newDLQWriter(ctx context.Context, client *kafka.Client, cfg Settings) (*dlqWriter, error) {
	topic, timeout := cfg.DLQTopic, cfg.ProduceTimeout
	if err := EnsureTopic(ctx, client, cfg.topicSpec(topic), nil); err != nil {
		return nil, err
	}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err == nil && (len(md.Topics) != 1 || md.Topics[0].Error != nil || len(md.Topics[0].Partitions) == 0) {
		err = fmt.Errorf("no partitions in metadata of %s", topic)
	}
	if err != nil {
		return nil, queue.Unavailable("kafka dlq topic "+topic, err)
	}
	parts := make([]int, len(md.Topics[0].Partitions))
	for i := range parts {
		parts[i] = i
	}
	return &dlqWriter{client: client, topic: topic, parts: parts, timeout: timeout}, nil
}

// deadRecord encodes dead with the job's raw envelope (as JSON when it is
// valid JSON, else as a JSON string). When the record would not fit in a
// produce request, the response and then the job are left out; the job
// stays readable at the source the record's headers name, until retention.
func deadRecord(dead queue.DeadLetter, raw []byte) ([]byte, error) {
	dead = dead.WithJob(raw)
	const room = maxRequestBytes - 1024 // key and headers
	for step := 0; ; step++ {
		b, err := json.Marshal(dead)
		if err != nil {
			return nil, fmt.Errorf("encode dead letter: %w", err)
		}
		if len(b) <= room || step == 2 {
			return b, nil
		}
		if step == 0 {
			dead.Response = ""
		} else {
			dead.Job = json.RawMessage(`"(left out: larger than a Kafka request; read it at the source header)"`)
		}
	}
}

// write produces one dead-letter record for job and waits for acks=all,
// retrying errors that may pass (a leader moving, a connection cut) with
// backoff attempt² × 20ms up to 250ms, bounded by ctx and the produce
// timeout. An error wraps queue.ErrUnavailable.
func (q *dlqWriter) write(ctx context.Context, job *queue.Claimed, dead *queue.DeadLetter, source string) error {
	rec, err := deadRecord(*dead, job.Raw)
	if err != nil {
		return err
	}
	key := []byte(job.Envelope.Tenant)
	headers := []kafka.Header{
		{Key: HeaderJobID, Value: []byte(job.Envelope.ID)},
		{Key: HeaderTenant, Value: key},
		{Key: HeaderDLQReason, Value: []byte(dead.Reason)},
		{Key: HeaderDLQSource, Value: []byte(source)},
	}
	partition := kafka.Murmur2Balancer{}.Balance(kafka.Message{Key: key}, q.parts...)
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		res, err := q.client.Produce(ctx, &kafka.ProduceRequest{
			Topic: q.topic, Partition: partition, RequiredAcks: kafka.RequireAll,
			Records: kafka.NewRecordReader(kafka.Record{Key: kafka.NewBytes(key), Value: kafka.NewBytes(rec), Headers: headers}),
		})
		if err == nil && res.Error != nil {
			err = res.Error
		}
		if err == nil {
			for _, rerr := range res.RecordErrors {
				err = rerr
			}
		}
		if err == nil {
			return nil
		}
		if !retriable(err) || ctx.Err() != nil {
			return queue.Unavailable("kafka dead letter to "+q.topic, err)
		}
		sleepCtx(ctx, min(time.Duration(attempt*attempt)*backoffMin, backoffMax))
	}
}

// sourceOf names a job's place in the log: "topic/partition@offset".
func sourceOf(topic string, partition int, offset int64) string {
	return claimedSource(topic, strconv.Itoa(partition), offset)
}

// claimedSource is sourceOf of a claimed job's partition as it carries it
// (queue.Claimed.Source): the record's identity kafka_finish.lua marks.
func claimedSource(topic, partition string, offset int64) string {
	return topic + "/" + partition + "@" + strconv.FormatInt(offset, 10)
}
