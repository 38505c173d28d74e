// Command drainer runs sluice's drainer: it loads the configuration, connects
// to Redis and the queue backend, and drains every tenant's jobs into its
// downstream at the tenant's outflow rate until SIGINT or SIGTERM. Then it
// stops taking jobs, lets deliveries in flight finish until
// drainer.shutdown_timeout, returns the rest to the queue, and exits.
//
//	drainer --config /etc/sluice/sluice.yaml
//
// It serves /metrics, /healthz and /readyz on drainer.listen, and
// /debug/pprof/ there too when drainer.pprof is true.
//
// With queue.backend kafka the drainer is a member of the consumer group
// kafka.consumer_group; on SIGTERM it first stops the drainer as above,
// then commits its partitions' offsets and leaves the group.
//
// Exit codes: 0 after a clean shutdown, 1 when the drainer failed while
// running or shutting down, 2 when it could not start (bad flags or
// configuration, Redis or Kafka unreachable, a broken Lua script).
package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/drainer"
	"github.com/sluicehq/sluice/internal/boot"
	"github.com/sluicehq/sluice/internal/scheduler"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/backend"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop, svc, err := boot.Start()
	defer stop()
	if err != nil {
		return 2
	}
	rdb := boot.Redis(svc.Config.Redis)
	defer rdb.Close()

	// The ops port is bound before anything joins the queue: a second
	// drainer started with the same drainer.listen (so the same
	// kafka.instance_id auto) fails here instead of removing the running
	// one's group member first.
	ln, err := net.Listen("tcp", svc.Config.Drainer.Listen)
	if err != nil {
		svc.Log.Error("ops server", "addr", svc.Config.Drainer.Listen, "err", err)
		return 2
	}
	defer ln.Close()
	reg := boot.Metrics()
	d, runConsumer, ok := build(ctx, svc, rdb, reg)
	if !ok {
		return 2
	}
	return serve(ctx, stop, svc, ln, d, runConsumer, rdb, reg)
}

// build loads the scripts and the runtime tenants and builds the queue
// consumer and the drainer, which follows every tenant change from then
// on. It logs what failed and reports false when the drainer cannot start.
func build(ctx context.Context, svc *boot.Service, rdb redis.UniversalClient, reg *prometheus.Registry) (*drainer.Drainer, func(context.Context) error, bool) {
	log, cfg := svc.Log, svc.Config
	if err := boot.Scripts(ctx, rdb); err != nil {
		log.Error("load scripts", "err", err)
		return nil, nil, false
	}
	boot.CheckPersistence(ctx, rdb, cfg.Queue.Backend, log, reg)
	// Runtime tenants (admin API): the registry merges the file's tenants
	// with those stored in Redis and hands every change to the drainer.
	registry, err := boot.Tenants(ctx, rdb, cfg, log, reg)
	if err != nil {
		log.Error("runtime tenants", "err", err)
		return nil, nil, false
	}
	merged := registry.Config()
	consumer, runConsumer, err := newConsumer(ctx, boot.Queue(merged, rdb, log, reg))
	if err != nil {
		log.Error("queue consumer", "backend", cfg.Queue.Backend, "err", err)
		return nil, nil, false
	}
	sched, producer, err := newScheduler(ctx, boot.Queue(merged, rdb, log, reg))
	if err != nil {
		log.Error("scheduler", "backend", cfg.Queue.Backend, "err", err)
		return nil, nil, false
	}
	// The scheduler's producer closes after the consumer, which serve stops
	// after the drainer (and so the scheduler): its last counts are written.
	runQueue := runConsumer
	runConsumer = func(ctx context.Context) error {
		err := runQueue(ctx)
		if cerr := producer.Close(); cerr != nil {
			log.Warn("scheduler's producer close", "err", cerr)
		}
		return err
	}
	d, err := drainer.New(drainer.Config{
		Consumer: consumer, Redis: rdb, Tenants: merged.Tenants, Settings: cfg.Drainer,
		Scheduler: sched, Logger: log, Registerer: reg,
	})
	if err != nil {
		log.Error("drainer", "err", err)
		return nil, nil, false
	}
	go func() {
		if err := registry.Run(ctx, func(c *config.Config) { d.SetTenants(c.Tenants) }); err != nil {
			log.Error("tenant registry stopped; runtime changes are no longer applied", "err", err)
		}
	}()
	boot.WatchConfig(ctx, svc.ConfigPath, registry, log, reg)
	return d, runConsumer, true
}

// serve runs the ops server (on ln, bound by run), the queue consumer and the drainer until ctx
// is done or one of them fails (then it calls stop), shuts them down and
// returns the exit code. Shutdown order: the drainer first (stops intake,
// finishes or returns jobs within drainer.shutdown_timeout), then the queue
// consumer (Kafka: commits and leaves the group), then the ops server, so
// /metrics and /readyz answer to the end.
func serve(ctx context.Context, stop context.CancelFunc, svc *boot.Service, ln net.Listener, d *drainer.Drainer, runConsumer func(context.Context) error, rdb redis.UniversalClient, reg *prometheus.Registry) int {
	log, cfg := svc.Log, svc.Config
	srv := &http.Server{Handler: ops(d, rdb, reg, cfg.Drainer.Pprof), ReadHeaderTimeout: 5 * time.Second}
	srvErr := make(chan error, 1)
	go func() { srvErr <- srv.Serve(ln) }()

	code := 0
	consumerCtx, stopConsumer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsumer()
	consumerErr := make(chan error, 1)
	go func() { consumerErr <- runConsumer(consumerCtx) }()
	runErr := make(chan error, 1)
	go func() { runErr <- d.Run(ctx) }()
	select {
	case err := <-srvErr:
		log.Error("ops server", "addr", cfg.Drainer.Listen, "err", err)
		code = 1
	case err := <-consumerErr:
		log.Error("queue consumer stopped", "err", err)
		consumerErr <- nil
		code = 1
	case err := <-runErr:
		runErr <- err
	}
	stop()
	if err := <-runErr; err != nil {
		log.Error("drainer stopped", "err", err)
		code = 1
	}
	stopConsumer()
	if err := <-consumerErr; err != nil {
		log.Error("queue consumer stopped", "err", err)
		code = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("ops server shutdown", "err", err)
	}
	return code
}

// newConsumer returns the drain side of cfg.Backend and the function that
// runs it until its context ends (backend.NewConsumer), giving a Kafka
// consumer's start (the DLQ topic) 30s.
func newConsumer(ctx context.Context, cfg backend.Config) (queue.Consumer, func(context.Context) error, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return backend.NewConsumer(ctx, cfg)
}

// newScheduler returns the scheduler of due scheduled jobs and the Producer
// of cfg.Backend it enqueues them through (giving a Kafka producer's start
// 30s). The caller closes the producer once the drainer, which runs the
// scheduler, has stopped (a Kafka producer then writes the backlog counts it
// still holds).
func newScheduler(ctx context.Context, cfg backend.Config) (*scheduler.Scheduler, queue.Producer, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := backend.NewProducer(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	// A move's lease outlasts its longest move (an enqueue and its end,
	// each bounded by 10 s), whatever drainer.lease is, so no other
	// scheduler takes the jobs of a move still under way.
	s, err := scheduler.New(scheduler.Config{Redis: cfg.Redis, Producer: p, Lease: max(cfg.Lease, scheduler.DefaultLease),
		Logger: cfg.Logger, Registerer: cfg.Registerer})
	if err != nil {
		_ = p.Close()
		return nil, nil, err
	}
	return s, p, nil
}

// ops serves /metrics, /healthz (the process is up) and /readyz (draining,
// and Redis answers), and with pprof (drainer.pprof) /debug/pprof/.
func ops(d *drainer.Drainer, rdb redis.UniversalClient, reg *prometheus.Registry, pprof bool) http.Handler {
	mux := http.NewServeMux()
	if pprof {
		boot.Pprof(mux)
	}
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !d.Ready() {
			http.Error(w, "not running", http.StatusServiceUnavailable)
			return
		}
		if err := rdb.Ping(ctx).Err(); err != nil {
			http.Error(w, "redis: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	return mux
}
