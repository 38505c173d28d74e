// Command demosink is a downstream for sluice's demo and tests: it accepts a
// POST on any path, counts jobs per tenant (Sluice-Tenant) and duplicate job
// ids (Sluice-Job-Id), serves the counts and recent rates as JSON on
// GET /stats, and logs the per-tenant rates once a second.
//
//	demosink --listen 127.0.0.1:9000 --fail-rate 0.05 --latency 20ms
//
// --fail-rate answers that share of jobs 503 with Retry-After: 1, to show
// retries and adaptive backoff. Exit codes: 0 after SIGINT or SIGTERM, 1 when
// the listener fails, 2 on bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluicehq/sluice/internal/demosink"
)

func main() {
	os.Exit(run())
}

func run() int {
	listen := flag.String("listen", "127.0.0.1:9000", "address to serve on")
	failRate := flag.Float64("fail-rate", 0, "share of jobs answered 503 + Retry-After: 1, in [0, 1]")
	latency := flag.Duration("latency", 0, "wait before answering each job")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *failRate < 0 || *failRate > 1 || *latency < 0 {
		fmt.Fprintln(os.Stderr, "demosink: --fail-rate must be in [0, 1] and --latency not negative")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sink := demosink.New(demosink.Config{FailRate: *failRate, Latency: *latency})
	srv := &http.Server{Addr: *listen, Handler: sink, ReadHeaderTimeout: 5 * time.Second}
	go sink.Log(ctx, log, time.Second)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("demosink listening", "listen", *listen, "fail_rate", *failRate, "latency", *latency)

	select {
	case err := <-errc:
		log.Error("demosink: serve", "err", err)
		return 1
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("demosink: shutdown", "err", err)
		return 1
	}
	return 0
}
