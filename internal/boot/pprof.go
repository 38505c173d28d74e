package boot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// Pprof adds net/http/pprof's endpoints under /debug/pprof/ to mux: the
// index, cmdline, profile (CPU, ?seconds=N), symbol, trace and every
// runtime profile by name (heap, allocs, goroutine, ...). The commands add
// them only when their configuration asks (drainer.pprof,
// ingest.pprof_listen); they are off by default.
func Pprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// ServePprof serves Pprof's endpoints alone on addr until ctx ends, in the
// background, and returns the address it listens on. The caller decides
// what a listener that cannot be opened means (ingest logs it and runs on:
// the profiles are a diagnostic, not part of the service).
func ServePprof(ctx context.Context, addr string, log *slog.Logger) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("pprof: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	Pprof(mux)
	// No WriteTimeout: a CPU profile or trace answers after its seconds.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof server", "addr", addr, "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return ln.Addr().String(), nil
}
