// Command ingest runs sluice's HTTP API: it loads the configuration, connects
// to Redis and the queue backend, and serves until SIGINT or SIGTERM, then
// drains in-flight requests and exits.
//
//	ingest --config /etc/sluice/sluice.yaml
//
// Exit codes: 0 after a clean shutdown, 1 when the service failed while
// running or shutting down, 2 when it could not start (bad flags or
// configuration, Redis or the queue unreachable, a broken Lua script).
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/tenants"
)

func main() {
	os.Exit(run())
}

func run() int {
	configPath := flag.String("config", "", "YAML configuration file (default: $SLUICE_CONFIG)")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cfg, err := config.Load(*configPath)
	if err != nil {
		log.Error("configuration", "err", err)
		return 2
	}
	// Every command is bounded by cfg.Redis.Timeout and retried at most once,
	// and a refused dial is not retried inside go-redis (its default is 5
	// dials 100ms apart), so a dead Redis turns into fail-open/fail-closed
	// answers within about two timeouts instead of seconds.
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:         redisAddrs(cfg.Redis),
		Password:      cfg.Redis.Password,
		DB:            cfg.Redis.DB,
		PoolSize:      cfg.Redis.PoolSize,
		DialTimeout:   cfg.Redis.Timeout,
		ReadTimeout:   cfg.Redis.Timeout,
		WriteTimeout:  cfg.Redis.Timeout,
		MaxRetries:    1,
		DialerRetries: 1,
		IsClusterMode: len(cfg.Redis.ClusterAddrs) > 0,
	})
	defer rdb.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	admitter := limits.NewAdmitter(rdb, limits.WithLogger(log), limits.WithRegisterer(reg))
	if err := admitter.Load(ctx); err != nil {
		log.Error("load admission scripts", "err", err)
		return 2
	}
	// Runtime tenants (admin API): the registry merges the file's tenants
	// with those stored in Redis and hands every change to the server.
	registry, err := runtimeTenants(ctx, rdb, cfg, log, reg)
	if err != nil {
		log.Error("runtime tenants", "err", err)
		return 2
	}
	producer, err := queue.New(ctx, cfg, queue.ProducerDeps{Redis: rdb, Log: log, Registerer: reg})
	if err != nil {
		log.Error("queue backend", "backend", cfg.Queue.Backend, "err", err)
		return 2
	}
	srv, err := ingest.New(ingest.Options{
		Config: registry.Config(), Redis: rdb, Producer: producer, Admitter: admitter,
		Logger: log, Registerer: reg, Gatherer: reg, Tenants: registry,
	})
	if err != nil {
		_ = producer.Close()
		log.Error("ingest", "err", err)
		return 2
	}
	go func() {
		if err := registry.Run(ctx, srv.SetConfig); err != nil {
			log.Error("tenant registry stopped; runtime changes are no longer applied", "err", err)
		}
	}()
	// A changed config file is reloaded and, when valid, becomes the
	// registry's base: admin changes stay laid over it.
	if path := configFile(*configPath); path != "" {
		w := config.NewWatcher(path, registry.SetBase, log, reg)
		go func() {
			if err := w.Run(ctx); err != nil {
				log.Error("config watcher stopped; changes are no longer applied", "err", err)
			}
		}()
	}
	// Run closes the producer after the HTTP server has drained.
	if err := srv.Run(ctx); err != nil {
		log.Error("ingest stopped", "err", err)
		return 1
	}
	log.Info("ingest stopped")
	return 0
}

// runtimeTenants loads the admin scripts and returns the tenant registry,
// synced once. A failed first read is logged, not fatal: the file's tenants
// serve until Redis answers and the registry catches up.
func runtimeTenants(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*tenants.Registry, error) {
	store := tenants.NewStore(rdb)
	if err := store.Load(ctx); err != nil {
		return nil, err
	}
	if err := limits.LoadRescale(ctx, rdb); err != nil {
		return nil, err
	}
	registry, err := tenants.NewRegistry(tenants.RegistryOptions{Store: store, Redis: rdb, Base: cfg, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	if err := registry.Sync(ctx); err != nil {
		log.Warn("cannot read runtime tenants yet; serving the file's tenants until Redis answers", "err", err)
	}
	return registry, nil
}

// configFile is the file config.Load read: the flag, else $SLUICE_CONFIG.
func configFile(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	return os.Getenv(config.EnvPrefix + "_CONFIG")
}

// redisAddrs is the cluster seeds when set, otherwise the standalone address.
func redisAddrs(r config.Redis) []string {
	if len(r.ClusterAddrs) > 0 {
		return r.ClusterAddrs
	}
	return []string{r.Addr}
}
