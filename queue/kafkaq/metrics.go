package kafkaq

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/queue/internal/metrics"
)

// consumerMetrics are the Kafka consumer's series.
type consumerMetrics struct {
	lag       *prometheus.GaugeVec   // topic, partition
	heldJobs  *prometheus.GaugeVec   // topic, partition
	paused    *prometheus.GaugeVec   // topic, partition
	errors    *prometheus.CounterVec // op
	redisErrs *prometheus.CounterVec // op
	overflows prometheus.Counter

	predecessors prometheus.Counter
	heldFinishes prometheus.Gauge
}

// newConsumerMetrics registers (or finds) the consumer's metrics:
//
//	sluice_consumer_lag{topic,partition}            high watermark − commit watermark
//	sluice_lane_jobs{topic,partition}               jobs held in memory
//	sluice_kafka_partition_paused{topic,partition}  1 while at a bound
//	sluice_kafka_errors_total{op}                   fetch, commit, list_offsets, offset_fetch, join, dlq
//	sluice_kafka_lane_overflows_total               times a tenant's FIFO reached MaxTenantJobs
//	sluice_redis_errors_total{op}                   finish, cancel_check, take, job_state
//	sluice_kafka_predecessors_removed_total         previous members of this instance removed at start (member.go)
//	sluice_kafka_finishes_unwritten                 finished jobs whose Redis write is held for a retry (heldfinish.go)
func newConsumerMetrics(reg prometheus.Registerer) (*consumerMetrics, error) {
	var m consumerMetrics
	var err error
	part := []string{"topic", "partition"}
	if m.lag, err = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_consumer_lag",
		Help: "Jobs of the partition not yet finished: high watermark minus the commit watermark (lowest unfinished offset).",
	}, part)); err != nil {
		return nil, err
	}
	if m.heldJobs, err = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_lane_jobs",
		Help: "Jobs of the partition held in this drainer's memory (queued in per-tenant FIFOs, deferred, claimed).",
	}, part)); err != nil {
		return nil, err
	}
	if m.paused, err = metrics.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_kafka_partition_paused",
		Help: "1 while the partition stops fetching at its memory or window bound.",
	}, part)); err != nil {
		return nil, err
	}
	if m.errors, err = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_kafka_errors_total",
		Help: "Kafka calls of the consumer that failed, by operation.",
	}, []string{"op"})); err != nil {
		return nil, err
	}
	if m.redisErrs, err = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_redis_errors_total",
		Help: "Redis commands that failed, by operation.",
	}, []string{"op"})); err != nil {
		return nil, err
	}
	if m.overflows, err = metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_kafka_lane_overflows_total",
		Help: "Times a tenant's FIFO in a partition reached its bound; its later jobs were left in Kafka to be read again.",
	})); err != nil {
		return nil, err
	}
	if m.predecessors, err = metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_kafka_predecessors_removed_total",
		Help: "Consumer-group members of this drainer instance's previous process (killed without leaving) removed from the group at start, so the rebalance does not wait out their session.",
	})); err != nil {
		return nil, err
	}
	if m.heldFinishes, err = metrics.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_kafka_finishes_unwritten",
		Help: "Jobs this drainer finished whose Redis write (backlog counter, final state, DLQ listing) failed and is sent again every 500 ms; their offsets wait.",
	})); err != nil {
		return nil, err
	}
	return &m, nil
}

// forget deletes a partition's series when this consumer lets it go, so the
// partition's new owner is the only one reporting it.
func (m *consumerMetrics) forget(topic string, partition int) {
	p := strconv.Itoa(partition)
	m.lag.DeleteLabelValues(topic, p)
	m.heldJobs.DeleteLabelValues(topic, p)
	m.paused.DeleteLabelValues(topic, p)
}
