package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/queue"
	queuebackend "github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/kafkaq"
)

// embedded is one drainer.Drainer run inside the harness, as a program
// embedding sluice with a Go Handler would run it, with its own Redis
// client and queue consumer.
type embedded struct {
	rdb *redis.Client
	d   *drainer.Drainer
	// runConsumer runs the consumer until its ctx is done (Kafka: the group
	// membership); nil for the Redis backend, whose consumer has no loop.
	runConsumer func(context.Context) error
}

// newEmbedded builds one embedded drainer of tenants on backend (kafka
// reads topic with consumer group group), delivering to h with no outflow
// limit.
func (b *bench) newEmbedded(ctx context.Context, backend, topic, group string, tenants []string, h drainer.Handler) (*embedded, error) {
	e := &embedded{rdb: redis.NewClient(&redis.Options{Addr: b.o.redisAddr})}
	fail := func(err error) (*embedded, error) {
		e.rdb.Close()
		return nil, err
	}
	if err := lua.LoadAll(ctx, e.rdb); err != nil {
		return fail(err)
	}
	c, run, err := queuebackend.NewConsumer(ctx, queuebackend.Config{
		Backend: backend,
		Kafka: kafkaq.Settings{Brokers: b.o.kafkaBrokers, Topic: topic, DLQTopic: topic + dlqSuffix, ConsumerGroup: group,
			Partitions: kafkaPartitions, ReplicationFactor: 1},
		Tenants: tenants, Redis: e.rdb, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return fail(err)
	}
	if backend == queuebackend.Kafka {
		e.runConsumer = run
	}
	tcfg := map[string]config.Tenant{}
	for _, t := range tenants {
		tcfg[t] = config.Tenant{}
	}
	d, err := drainer.New(drainer.Config{Consumer: c, Redis: e.rdb, Tenants: tcfg, Handler: h,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return fail(err)
	}
	e.d = d
	return e, nil
}

// handlerThroughput is one throughput row of the Go Handler embedding on
// c's backend: c.workers embedded drainers in this process, a Handler that
// only records the job, no outflow limit.
func (b *bench) handlerThroughput(ctx context.Context, c tputCase) tputRow {
	row, backend, workers := c.row(b.o.tputJobs), c.backend, c.workers
	base := c.name("bench-" + b.runID)
	names := tenantNames(base, c.tenants)
	topic := "sluice-" + base
	defer deleteTenants(context.WithoutCancel(ctx), b.rdb, names)
	if backend == "kafka" {
		defer b.deleteTopics(context.WithoutCancel(ctx), topic, topic+dlqSuffix)
		row.err = preloadKafka(ctx, b.rdb, b.o.kafkaBrokers, topic, names, row.jobs)
	} else {
		row.err = preloadRedis(ctx, b.rdb, names, row.jobs)
	}
	if row.err != nil {
		return row
	}
	h := drainer.HandlerFunc(func(ctx context.Context, job queue.Envelope) error {
		now := time.Now()
		b.rec.add(job.ID, now, now)
		return nil
	})
	var fleet []*embedded
	defer func() {
		for _, e := range fleet {
			e.rdb.Close()
		}
	}()
	for range workers {
		e, err := b.newEmbedded(ctx, backend, topic, base, names, h)
		if err != nil {
			row.err = err
			return row
		}
		fleet = append(fleet, e)
	}

	b.rec.take()
	cnt := startCounter(ctx, b.rdb)
	stopProfile := b.profileHarness(base)
	waitErr, stopErr := b.driveEmbedded(ctx, fleet, row.jobs)
	if note := stopProfile(); note != "" {
		row.note = note
	}
	row.finish(b.rec.take(), waitErr, stopErr)
	row.cmds = cnt.perJob(ctx, row.res.Jobs)
	return row
}

// driveEmbedded runs fleet until the recorder holds jobs arrivals (or
// the row's timeout, or a drainer or consumer failed), then stops it; it
// returns the wait's error and the stop's.
func (b *bench) driveEmbedded(ctx context.Context, fleet []*embedded, jobs int) (waitErr, stopErr error) {
	workers := len(fleet)
	// Shutdown order: the drainers (their deliveries finish), then the
	// consumers (Kafka: commit and leave the group).
	drainCtx, stopDrain := context.WithCancel(ctx)
	consumeCtx, stopConsume := context.WithCancel(context.WithoutCancel(ctx))
	var drains, consumers sync.WaitGroup
	errs := make(chan error, 2*workers)
	for _, e := range fleet {
		if e.runConsumer != nil {
			consumers.Add(1)
			go func() {
				defer consumers.Done()
				if err := e.runConsumer(consumeCtx); err != nil {
					errs <- fmt.Errorf("consumer: %w", err)
				}
			}()
		}
		drains.Add(1)
		go func() {
			defer drains.Done()
			if err := e.d.Run(drainCtx); err != nil {
				errs <- fmt.Errorf("drainer: %w", err)
			}
		}()
	}
	failed := func() error {
		select {
		case err := <-errs:
			return err
		default:
			return nil
		}
	}
	waitErr = b.rec.waitCount(ctx, jobs, tputTimeout(jobs), failed)
	stopDrain()
	drains.Wait()
	stopConsume()
	consumers.Wait()
	close(errs)
	var stopErrs []error
	for err := range errs {
		stopErrs = append(stopErrs, err)
	}
	return waitErr, errors.Join(stopErrs...)
}
