package config

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
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
// and the running config is kept. A file with no YAML in it (empty, or only
// blank lines and comments) is refused the same way: it is what a write
// caught half done reads as (truncated, not yet written), and applying it
// would drop every tenant of the file and every admin token at once. A file
// that cannot be read is reported once, not again on every event in its
// folder (a chmod included), until it can be read. The file is read once
// per reload: the digest, the blank check and the config are of the same
// bytes.
type Watcher struct {
	cfg     WatcherConfig
	log     *slog.Logger
	reloads *prometheus.CounterVec
}

// DefaultDebounce is the default of WatcherConfig.Debounce.
const DefaultDebounce = 100 * time.Millisecond

// WatcherConfig is a Watcher's settings and dependencies. Path and Apply are
// required.
type WatcherConfig struct {
	// Path is the config file.
	Path string
	// Apply receives every new valid config. It must swap it in atomically.
	Apply func(*Config)
	// Debounce groups a burst of file events into one reload (default
	// DefaultDebounce, 100ms).
	Debounce time.Duration
	// Logger receives reload outcomes. Default: slog.Default().
	Logger *slog.Logger
	// Registerer receives sluice_config_reloads_total. Default: none
	// registered (it still counts).
	Registerer prometheus.Registerer
}

// NewWatcher returns a Watcher of cfg.Path. It fails, naming the field,
// when Path or Apply is missing, or when the metric cannot be registered.
func NewWatcher(cfg WatcherConfig) (*Watcher, error) {
	switch {
	case cfg.Path == "":
		return nil, errors.New("config: new watcher: WatcherConfig.Path is required")
	case cfg.Apply == nil:
		return nil, errors.New("config: new watcher: WatcherConfig.Apply is required")
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	w := &Watcher{cfg: cfg, log: cfg.Logger}
	if w.log == nil {
		w.log = slog.Default()
	}
	w.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_config_reloads_total",
		Help: "Config file reloads by result (ok, error).",
	}, []string{"result"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(w.reloads); err != nil {
			return nil, fmt.Errorf("config: register watcher metrics: %w", err)
		}
	}
	w.reloads.WithLabelValues("ok")
	w.reloads.WithLabelValues("error")
	return w, nil
}

// Run watches the file's folder (so editors' rename-and-replace and
// Kubernetes ConfigMap symlink swaps are seen) until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config: watch %s: %w", w.cfg.Path, err)
	}
	defer fw.Close()
	if err := fw.Add(filepath.Dir(w.cfg.Path)); err != nil {
		return fmt.Errorf("config: watch %s: %w", w.cfg.Path, err)
	}
	// The file's digest, not its bytes: a 10,000-tenant file is a megabyte
	// the watcher need not keep.
	_, last, _ := w.read()
	reported := false // the unreadable file (last nil) was reported
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-fw.Events:
			if !ok {
				return nil
			}
			if ev.Has(fsnotify.Chmod) && last != nil {
				continue // a chmod may make an unreadable file readable
			}
			timer = time.After(w.cfg.Debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return nil
			}
			w.log.Warn("config watch error", "path", w.cfg.Path, "err", err)
		case <-timer:
			timer = nil
			// One read: the digest, the blank check and the config are of
			// the same bytes, so a write landing between them cannot have
			// one judge a file the other did not read.
			raw, cur, rerr := w.read()
			if bytes.Equal(cur, last) && (cur != nil || reported) {
				continue
			}
			last, reported = cur, cur == nil
			w.reload(raw, rerr)
		}
	}
}

// read returns the file's bytes and their SHA-256, or the read's error
// and a nil digest.
func (w *Watcher) read() (raw, digest []byte, err error) {
	b, err := os.ReadFile(w.cfg.Path)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(b)
	return b, sum[:], nil
}

// reload loads and validates the file and applies it, or keeps the old one.
func (w *Watcher) reload(raw []byte, readErr error) {
	var cfg *Config
	var err error
	switch {
	case readErr != nil:
		err = fmt.Errorf("config: read %s: %w", w.cfg.Path, readErr)
	case blank(raw):
		err = fmt.Errorf("config: %s has no YAML in it (empty, or only comments): a reload of a blank file is refused, "+
			"as a write caught half done; write the whole file (best: write a new file and rename it over this one), "+
			"or restart to run on defaults and the environment", w.cfg.Path)
	default:
		if cfg, err = Parse(raw); err != nil {
			err = fmt.Errorf("%s: %w", w.cfg.Path, err)
		}
	}
	if err != nil {
		w.reloads.WithLabelValues("error").Inc()
		w.log.Error("config reload rejected; keeping the running config", "path", w.cfg.Path, "err", err)
		return
	}
	w.reloads.WithLabelValues("ok").Inc()
	w.cfg.Apply(cfg)
	w.log.Info("config reloaded", "path", w.cfg.Path, "tenants", len(cfg.Tenants))
}

// blank reports whether b holds no YAML: only blank lines and comments, or
// nothing (see Watcher).
func blank(b []byte) bool {
	for line := range bytes.Lines(b) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}
