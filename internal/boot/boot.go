// Package boot holds what the ingest and drainer commands both do at start:
// the Redis client, the metrics registry, the runtime tenant registry and the
// config file watcher. The commands stay thin; this package is their shared
// wiring, not logic.
package boot

import (
	"context"
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/lua"
	"github.com/sluicehq/sluice/tenants"
)

// Redis returns the client of cfg: a Cluster client when cluster_addrs is
// set; with redis.sentinel, go-redis's failover client (a *redis.Client),
// which asks the Sentinels for the current primary, hears their
// +switch-master and moves every new command to a promoted replica
// without a restart; else a client of addr. Every command is bounded by
// cfg.Timeout and never sent again by go-redis (MaxRetries -1): after a
// read timeout go-redis sends a pipeline once more, so a script whose
// reply was late ran twice (a submit that queued its job ran again, was
// refused by the limit its first run charged, and answered 429 for a
// queued job; TestSlowScriptNotSentTwice). sluice's callers tell an
// outcome they do not know (lua.MayHaveRun, lua.NoReply) and send again
// only what a second run cannot double. A refused dial is retried once
// (DialerRetries; go-redis' default is 5 dials 100ms apart), so a dead
// Redis turns into fail-open/fail-closed answers and drainer pauses within
// about a timeout instead of seconds.
func Redis(cfg config.Redis) redis.UniversalClient {
	addrs := []string{cfg.Addr}
	switch {
	case len(cfg.ClusterAddrs) > 0:
		addrs = cfg.ClusterAddrs
	case cfg.Sentinel.Enabled():
		addrs = cfg.Sentinel.Addrs
	}
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:            addrs,
		MasterName:       cfg.Sentinel.MasterName,
		SentinelPassword: cfg.Sentinel.Password,
		Password:         cfg.Password,
		DB:               cfg.DB,
		PoolSize:         cfg.PoolSize,
		DialTimeout:      cfg.Timeout,
		ReadTimeout:      cfg.Timeout,
		WriteTimeout:     cfg.Timeout,
		MaxRetries:       -1,
		// A Cluster client sends a call again on a timeout up to
		// MaxRedirects times, MaxRetries aside: -1 sends it once. A MOVED
		// or ASK during a resharding then fails that one call (the client
		// reloads its slots, so the next goes right).
		MaxRedirects:  -1,
		DialerRetries: 1,
		IsClusterMode: len(cfg.ClusterAddrs) > 0,
	})
}

// Metrics returns a registry with the Go runtime and process collectors and
// the scripts' reload counter (lua.Collector).
func Metrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), lua.Collector())
	return reg
}

// Scripts loads every registered script (lua.LoadAll) on every master: a
// script Redis refuses, or a Redis that does not answer, stops the start.
func Scripts(ctx context.Context, rdb redis.UniversalClient) error {
	return lua.LoadAll(ctx, rdb)
}

// Tenants returns the runtime tenant registry over cfg's tenants, synced
// once. A failed first read is logged, not fatal: the file's tenants serve
// until Redis answers and the registry catches up.
func Tenants(ctx context.Context, rdb redis.UniversalClient, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*tenants.Registry, error) {
	registry, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: cfg, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	if err := registry.Sync(ctx); err != nil {
		log.Warn("cannot read runtime tenants yet; using the file's tenants until Redis answers", "err", err)
	}
	return registry, nil
}

// WatchConfig reloads the config file (the --config flag's value, else
// $SLUICE_CONFIG) on change until ctx ends; each valid file becomes the
// registry's base, so admin changes stay laid over it. Without a file it
// does nothing.
func WatchConfig(ctx context.Context, flagPath string, registry *tenants.Registry, log *slog.Logger, reg prometheus.Registerer) {
	path := flagPath
	if path == "" {
		path = os.Getenv(config.EnvPrefix + "_CONFIG")
	}
	if path == "" {
		return
	}
	w, err := config.NewWatcher(config.WatcherConfig{Path: path, Apply: registry.SetBase, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("config watcher not started; changes are not applied", "err", err)
		return
	}
	go func() {
		if err := w.Run(ctx); err != nil {
			log.Error("config watcher stopped; changes are no longer applied", "err", err)
		}
	}()
}
