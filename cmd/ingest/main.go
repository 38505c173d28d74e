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
	"log/slog"
	"os"

	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/boot"
	"github.com/sluicehq/sluice/limits"
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
	log, cfg := svc.Log, svc.Config
	rdb := boot.Redis(cfg.Redis)
	defer rdb.Close()

	reg := boot.Metrics()
	if err := boot.Scripts(ctx, rdb); err != nil {
		log.Error("load scripts", "err", err)
		return 2
	}
	boot.CheckPersistence(ctx, rdb, cfg.Queue.Backend, log, reg)

	admitter, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("admitter", "err", err)
		return 2
	}
	// Runtime tenants (admin API): the registry merges the file's tenants
	// with those stored in Redis and hands every change to the server.
	registry, err := boot.Tenants(ctx, rdb, cfg, log, reg)
	if err != nil {
		log.Error("runtime tenants", "err", err)
		return 2
	}
	producer, err := backend.NewProducer(ctx, boot.Queue(cfg, rdb, log, reg))
	if err != nil {
		log.Error("queue backend", "backend", cfg.Queue.Backend, "err", err)
		return 2
	}
	srv, err := ingest.New(ingest.Config{
		Settings: registry.Config(), Redis: rdb, Producer: producer, Admitter: admitter,
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
	boot.WatchConfig(ctx, svc.ConfigPath, registry, log, reg)
	servePprof(ctx, cfg.Ingest.PprofListen, log)
	// Run closes the producer after the HTTP server has drained.
	if err := srv.Run(ctx); err != nil {
		log.Error("ingest stopped", "err", err)
		return 1
	}
	log.Info("ingest stopped")
	return 0
}

// servePprof serves /debug/pprof/ on addr (ingest.pprof_listen) when it is
// set; a listener that cannot be opened is logged and ingest runs without.
func servePprof(ctx context.Context, addr string, log *slog.Logger) {
	if addr == "" {
		return
	}
	if bound, err := boot.ServePprof(ctx, addr, log); err != nil {
		log.Error("pprof listener; ingest runs without it", "err", err)
	} else {
		log.Info("pprof listening", "addr", bound)
	}
}
