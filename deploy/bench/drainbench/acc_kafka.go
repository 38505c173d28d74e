package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// accCase is one accuracy row to run: its system, sluice's backend (BullMQ:
// redis), the target rate and the worker processes.
type accCase struct {
	system  string // sluice | bullmq
	backend string // redis | kafka (BullMQ: redis)
	rate    float64
	workers int
}

// name is the case's unique stem for its tenant, topic and consumer group:
// prefix, the backend, rate and workers.
func (c accCase) name(prefix string) string {
	return fmt.Sprintf("%s-acc-%s-r%g-n%d", prefix, c.backend, c.rate, c.workers)
}

// accCases is the accuracy rows in the order they run: for each rate and
// worker count, BullMQ's row, then sluice's, one per backend of
// BENCH_ACC_BACKENDS in the order it lists them.
func accCases(o *options) []accCase {
	var out []accCase
	for _, rate := range o.rates {
		for _, n := range o.workers {
			if o.systems["bullmq"] {
				out = append(out, accCase{system: "bullmq", backend: "redis", rate: rate, workers: n})
			}
			if o.systems["sluice"] {
				for _, be := range o.accBackends {
					out = append(out, accCase{system: "sluice", backend: be, rate: rate, workers: n})
				}
			}
		}
	}
	return out
}

// runAcc runs one accuracy case with the row function of its system.
func (b *bench) runAcc(ctx context.Context, c accCase) accRow {
	if c.system == "bullmq" {
		return b.bullAccuracy(ctx, c.rate, c.workers)
	}
	return b.sluiceAccuracy(ctx, c)
}

// kafkaCmdsNote qualifies a Kafka accuracy row's Redis commands per job.
const kafkaCmdsNote = "Redis cmds/job count Redis commands only (the drainers' scripts and the backlog counters); " +
	"Kafka's fetches and offset commits are not in them"

// preloadAcc queues an accuracy row's n jobs for tenant on conf's backend:
// on Redis with the Redis producer; on Kafka on a topic and consumer group
// of the row's own (set in conf) with the Kafka producer, backlog counters
// in Redis. It returns what removes the row's topics afterwards (nothing
// on Redis).
func (b *bench) preloadAcc(ctx context.Context, conf *drainerConf, n int) (cleanup func(), err error) {
	if conf.backend != "kafka" {
		return func() {}, preloadRedis(ctx, b.rdb, conf.tenants, n)
	}
	base := conf.tenants[0]
	conf.brokers, conf.topic, conf.group = b.o.kafkaBrokers, "sluice-"+base, base
	cleanup = func() { b.deleteTopics(context.WithoutCancel(ctx), conf.topic, conf.topic+dlqSuffix) }
	return cleanup, preloadKafka(ctx, b.rdb, b.o.kafkaBrokers, conf.topic, conf.tenants, n)
}

// list is a comma-separated list of distinct members of allowed, in the
// order given.
func (e *envReader) list(name, full, quick string, allowed ...string) []string {
	var out []string
	for _, f := range strings.Split(e.str(name, full, quick), ",") {
		f = strings.TrimSpace(f)
		switch {
		case !slices.Contains(allowed, f):
			e.err = fmt.Errorf("%s: %q is not one of %s", name, f, strings.Join(allowed, ","))
		case !slices.Contains(out, f):
			out = append(out, f)
		}
	}
	return out
}
