package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// bench holds what every row shares.
type bench struct {
	o     *options
	rdb   *redis.Client // db 0: sluice
	bull  *redis.Client // db bullDB: BullMQ
	rec   *recorder
	sink  *sink
	bin   string // cmd/drainer
	dir   string // this run's configs, logs and BullMQ timestamp files
	runID string
	logf  func(format string, args ...any)
	// privateRedis is true when rdb is the run's private redis-server,
	// which the tenants part may FLUSHDB.
	privateRedis bool
}

// accRow is one accuracy row.
type accRow struct {
	system   string
	backend  string // redis | kafka (BullMQ: redis)
	rate     float64
	workers  int
	capacity float64 // sluice: outflow.capacity; BullMQ: limiter max
	res      accuracy
	cmds     calls // Redis commands and script calls per delivered job
	note     string
	err      error
}

// tputRow is one throughput row.
type tputRow struct {
	system  string // sluice | bullmq
	backend string // redis | kafka
	sink    string // how a job is consumed: http, handler, noop
	workers int
	tenants int
	round   int // which round of the row, from 1
	conc    int // BullMQ worker concurrency
	jobs    int
	res     throughput
	cmds    calls
	note    string
	err     error
	skipped string
}

// preloadCount is how many jobs keep a row at rate busy for d: rate × d
// with 20 % margin, plus the initial burst and a little more.
func preloadCount(rate float64, d time.Duration) int {
	return int(rate*d.Seconds()*1.2) + int(max(1, rate)) + 100
}

// fillWait bounds how long after the warm-up an accuracy row waits for the
// burst allowance to be used up.
func (o *options) fillWait() time.Duration { return max(10*time.Second, o.duration/2) }

// accuracyWindow waits for the first arrival (t0), picks the start of the
// steady window, runs until duration after it, stops f and returns the
// arrivals and the start. A failure to stop cleanly is returned as a note;
// the measurements stand.
//
// The window starts at t0 + warm-up; with untilFull, not before the burst
// allowance is spent. sluice's bucket lets capacity jobs go at once from an
// idle start, and while the drainers deliver faster than the rate the
// bucket keeps filling, so a window opened before it is full measures the
// start-up, not the rate. It is full once the arrivals N(t) reach rate ×
// (t − t0) + capacity (within 1 % of capacity + 1 job). When that has not
// happened fillWait after the warm-up (the drainers barely keep up with the
// rate, or a pause such as a Kafka rebalance put the arrivals behind that
// line for good, as an idle bucket holds no more than capacity), the window
// opens anyway and the note says so. BullMQ's limiter
// carries nothing from one window to the next, so its rows use the warm-up
// alone.
func (b *bench) accuracyWindow(ctx context.Context, f fleet, rate, capacity float64, untilFull bool) ([]arrival, time.Time, string, error) {
	if err := b.rec.waitCount(ctx, 1, 60*time.Second, f.failed); err != nil {
		f.stop(10 * time.Second)
		return nil, time.Time{}, "", fmt.Errorf("no job arrived: %w", err)
	}
	t0 := b.rec.first()
	var from, fullAt time.Time
	note := ""
	for from.IsZero() {
		if err := f.failed(); err != nil {
			f.stop(10 * time.Second)
			return b.rec.take(), t0, "", fmt.Errorf("a process died during the row: %w", err)
		}
		now := time.Now()
		if fullAt.IsZero() && (!untilFull || float64(b.rec.count())-rate*now.Sub(t0).Seconds() >= 0.99*capacity-1) {
			fullAt = now
		}
		switch {
		case !fullAt.IsZero() && now.Sub(t0) >= b.o.warmup:
			from = fullAt
			if w := t0.Add(b.o.warmup); w.After(from) {
				from = w
			}
		case now.Sub(t0) >= b.o.warmup+b.o.fillWait():
			from = now
			note = fmt.Sprintf("the bucket was not full %s after the first job (the drainers barely keep up with the rate, "+
				"or a pause such as a Kafka rebalance left the arrivals behind rate × time + capacity for good); window opened anyway", now.Sub(t0).Round(time.Second))
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	runErr := waitUntil(from.Add(b.o.duration+100*time.Millisecond), f.failed)
	stopErr := f.stop(20 * time.Second)
	arr := b.rec.take()
	if runErr != nil {
		return arr, from, note, fmt.Errorf("a process died during the row: %w", runErr)
	}
	if stopErr != nil {
		note = strings.TrimPrefix(note+"; ", "; ") + "stop: " + stopErr.Error()
	}
	return arr, from, note, nil
}

// sluiceAccuracy is one accuracy row of sluice on c's backend (redis or
// kafka): a tenant at rate with its default capacity, workers drainer
// processes.
func (b *bench) sluiceAccuracy(ctx context.Context, c accCase) accRow {
	row := accRow{system: "sluice", backend: c.backend, rate: c.rate, workers: c.workers, capacity: max(1, c.rate)}
	tenant := c.name("bench-" + b.runID)
	conf := drainerConf{redisAddr: b.o.redisAddr, backend: c.backend, tenants: []string{tenant}, rate: c.rate, sinkURL: b.sink.url}
	defer deleteTenants(context.WithoutCancel(ctx), b.rdb, conf.tenants)
	cleanup, err := b.preloadAcc(ctx, &conf, preloadCount(c.rate, b.o.warmup+b.o.fillWait()+b.o.duration))
	defer cleanup()
	if row.err = err; err != nil {
		return row
	}
	b.rec.take()
	cnt := startCounter(ctx, b.rdb)
	// On Kafka a member that joins late on a busy host would pause the
	// group for a rebalance after the window opened, and the bucket, idle
	// meanwhile, would let its capacity go at once when the group resumed:
	// start-up, measured as steady outflow (startFleet).
	f, groupNote, err := b.startFleet(ctx, tenant, c.workers, conf)
	if err != nil {
		row.err = err
		return row
	}
	arr, from, note, err := b.accuracyWindow(ctx, f, c.rate, row.capacity, true)
	if c.backend == "kafka" {
		note = strings.Join(slices.DeleteFunc([]string{groupNote, note, kafkaCmdsNote}, func(s string) bool { return s == "" }), "; ")
	}
	row.note, row.err = note, err
	row.res = measureAccuracy(arr, from, b.o.duration, c.rate, row.capacity)
	row.cmds = cnt.perJob(ctx, len(arr))
	return row
}

// bullAccuracy is one accuracy row of BullMQ: its limiter {max: rate ×
// window, duration: window}, workers worker processes posting to the sink.
func (b *bench) bullAccuracy(ctx context.Context, rate float64, workers int) accRow {
	maxJobs := max(1, int(rate*b.o.bullWindow.Seconds()))
	row := accRow{system: "bullmq", backend: "redis", rate: rate, workers: workers, capacity: float64(maxJobs)}
	q := fmt.Sprintf("%s-acc-r%g-n%d", b.runID, rate, workers)
	defer deletePattern(context.WithoutCancel(ctx), b.bull, bullPrefix+":"+q+":*")
	if row.err = b.bullLoad(ctx, q, preloadCount(rate, b.o.warmup+b.o.duration)); row.err != nil {
		return row
	}
	b.rec.take()
	cnt := startCounter(ctx, b.rdb)
	f, err := b.bullWorkers(ctx, q, workers, &limiter{max: maxJobs, window: b.o.bullWindow}, b.sink.url)
	if err != nil {
		row.err = err
		return row
	}
	arr, from, note, err := b.accuracyWindow(ctx, f, rate, row.capacity, false)
	row.note, row.err = note, err
	row.res = measureAccuracy(arr, from, b.o.duration, rate, row.capacity)
	row.cmds = cnt.perJob(ctx, len(arr))
	return row
}

// tputTimeout bounds a throughput row: a minute plus 2 ms per job.
func tputTimeout(n int) time.Duration { return time.Minute + time.Duration(n)*2*time.Millisecond }

// sluiceThroughput is one throughput row of cmd/drainer with no outflow
// limit and the HTTP sink, on c's backend (redis or kafka).
func (b *bench) sluiceThroughput(ctx context.Context, c tputCase) tputRow {
	row, backend, workers := c.row(b.o.tputJobs), c.backend, c.workers
	base := c.name("bench-" + b.runID)
	names := tenantNames(base, c.tenants)
	conf := drainerConf{redisAddr: b.o.redisAddr, backend: backend, tenants: names, sinkURL: b.sink.url, pprof: b.o.profileDir != ""}
	defer deleteTenants(context.WithoutCancel(ctx), b.rdb, names)
	if backend == "kafka" {
		conf.brokers, conf.topic, conf.group = b.o.kafkaBrokers, "sluice-"+base, base
		defer b.deleteTopics(context.WithoutCancel(ctx), conf.topic, conf.topic+dlqSuffix)
		if row.err = preloadKafka(ctx, b.rdb, b.o.kafkaBrokers, conf.topic, names, row.jobs); row.err != nil {
			return row
		}
	} else if row.err = preloadRedis(ctx, b.rdb, names, row.jobs); row.err != nil {
		return row
	}
	b.rec.take()
	cnt := startCounter(ctx, b.rdb)
	f, note, err := b.startFleet(ctx, base, workers, conf)
	row.note = note
	if err != nil {
		row.err = err
		return row
	}
	profiled := func() (string, error) { return "", nil }
	if conf.pprof {
		profiled = startProfile(ctx, f[0].addr, b.o.profileDir, base, profileSeconds(row.jobs))
	}
	waitErr := b.rec.waitCount(ctx, row.jobs, tputTimeout(row.jobs), f.failed)
	if path, err := profiled(); err != nil {
		row.note = strings.TrimPrefix(row.note+"; ", "; ") + "profile: " + err.Error()
	} else if path != "" {
		row.note = strings.TrimPrefix(row.note+"; ", "; ") + "CPU profile of drainer 0: " + path
	}
	for _, p := range f {
		if p.exitCode() == 2 && strings.Contains(tail(p.log, 2000), "not supported") {
			row.skipped = "cmd/drainer refused the backend: " + tail(p.log, 300)
			f.stop(10 * time.Second)
			b.rec.take()
			return row
		}
	}
	stopErr := f.stop(20 * time.Second)
	row.finish(b.rec.take(), waitErr, stopErr)
	row.cmds = cnt.perJob(ctx, row.res.Jobs)
	return row
}

// finish measures a throughput row and records what went wrong.
func (r *tputRow) finish(arr []arrival, waitErr, stopErr error) {
	r.res = measureThroughput(arr)
	if waitErr != nil {
		r.err = waitErr
	} else if stopErr != nil {
		r.note = strings.TrimPrefix(r.note+"; ", "; ") + "stop: " + stopErr.Error()
	}
}

// calls is a Redis server's command counts (INFO commandstats): every
// command, those run inside scripts included, and the script calls alone
// (EVAL, EVALSHA and their _ro forms, FCALL), which for a script-driven
// client are its round trips. They count every client, so a delta is exact
// only when nothing else uses the server.
type calls struct{ all, scripts float64 }

// commandCalls reads the server's counts; ok is false when it cannot.
func commandCalls(ctx context.Context, rdb *redis.Client) (c calls, ok bool) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return c, false
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, found := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !found || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		c.all += float64(n)
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
			c.scripts += float64(n)
		}
	}
	return c, true
}

// counter measures the Redis commands of one row.
type counter struct {
	rdb    *redis.Client
	before calls
	ok     bool
}

func startCounter(ctx context.Context, rdb *redis.Client) *counter {
	c := &counter{rdb: rdb}
	c.before, c.ok = commandCalls(ctx, rdb)
	return c
}

// perJob returns the commands and script calls per job since the start
// (zeros when the counts could not be read).
func (c *counter) perJob(ctx context.Context, jobs int) calls {
	after, ok := commandCalls(ctx, c.rdb)
	if !ok || !c.ok || jobs == 0 {
		return calls{}
	}
	return calls{all: (after.all - c.before.all) / float64(jobs), scripts: (after.scripts - c.before.scripts) / float64(jobs)}
}
