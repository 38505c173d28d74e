package config

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"
)

// Watcher reloads a config file when it changes. Each change is loaded and
// validated whole; a valid file is handed to Apply, an invalid one is logged
// with the reason, counted in sluice_config_reloads_total{result="error"},
// and the running config is kept.
type Watcher struct {
	// Path is the config file.
	Path string
	// Apply receives every new valid config. It must swap it in atomically.
	Apply func(*Config)
	// Log receives reload outcomes.
	Log *slog.Logger
	// Debounce groups a burst of file events into one reload (default 100ms).
	Debounce time.Duration

	reloads *prometheus.CounterVec
}

// NewWatcher returns a Watcher for path that registers its metric on reg.
func NewWatcher(path string, apply func(*Config), log *slog.Logger, reg prometheus.Registerer) *Watcher {
	w := &Watcher{Path: path, Apply: apply, Log: log, Debounce: 100 * time.Millisecond}
	w.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_config_reloads_total",
		Help: "Config file reloads by result (ok, error).",
	}, []string{"result"})
	if reg != nil {
		reg.MustRegister(w.reloads)
	}
	w.reloads.WithLabelValues("ok")
	w.reloads.WithLabelValues("error")
	return w
}

// Run watches the file's folder (so editors' rename-and-replace and
// Kubernetes ConfigMap symlink swaps are seen) until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watch %s: %w", w.Path, err)
	}
	defer fw.Close()
	if err := fw.Add(filepath.Dir(w.Path)); err != nil {
		return fmt.Errorf("config: watch %s: %w", w.Path, err)
	}
	last, _ := os.ReadFile(w.Path)
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			if ev.Has(fsnotify.Chmod) {
				continue
			}
			timer = time.After(w.Debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			w.Log.Warn("config watch error", "path", w.Path, "err", err)
		case <-timer:
			timer = nil
			cur, err := os.ReadFile(w.Path)
			if err == nil && bytes.Equal(cur, last) {
				continue
			}
			last = cur
			w.reload()
		}
	}
}

// reload loads and validates the file and applies it, or keeps the old one.
func (w *Watcher) reload() {
	cfg, err := Load(w.Path)
	if err != nil {
		w.reloads.WithLabelValues("error").Inc()
		w.Log.Error("config reload rejected; keeping the running config", "path", w.Path, "err", err)
		return
	}
	w.reloads.WithLabelValues("ok").Inc()
	w.Apply(cfg)
	w.Log.Info("config reloaded", "path", w.Path, "tenants", len(cfg.Tenants))
}

// ReloadsMetric returns the reload counter, for tests and dashboards.
func (w *Watcher) ReloadsMetric() *prometheus.CounterVec { return w.reloads }
