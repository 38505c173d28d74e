package config_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestWatcherReload writes a valid change, then a broken file, then a valid
// one again, and checks what was applied and counted.
func TestWatcherReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	write := func(s string) {
		t.Helper()
		// Write then rename, as editors and ConfigMaps do.
		tmp := filepath.Join(dir, ".tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("tenants: {a: {outflow: {rate: 1}}}\n")

	applied := make(chan *config.Config, 4)
	reg := prometheus.NewRegistry()
	w, err := config.NewWatcher(config.WatcherConfig{
		Path: path, Apply: func(c *config.Config) { applied <- c }, Debounce: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	time.Sleep(50 * time.Millisecond) // let the watch start before the first write

	next := func() *config.Config {
		t.Helper()
		select {
		case c := <-applied:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no config applied within 5s")
			return nil
		}
	}
	write("tenants: {a: {outflow: {rate: 7}}}\n")
	if got := next().Tenants["a"].Outflow.Rate; got != 7 {
		t.Fatalf("applied rate = %g, want 7", got)
	}

	// A reload runs the same validation as the start: a bad value, a rate
	// of 0 and a policy the admission script cannot compute are each
	// refused and the running config kept.
	// A blank file (a write caught between truncate and write) is refused
	// too: it would drop every tenant and admin token.
	for i, bad := range []string{
		"tenants: {a: {outflow: {rate: -3}}}\n",
		"tenants: {a: {outflow: {rate: 0}}}\n",
		"tenants: {a: {outflow: {rate: 7}, admission: {algorithm: gcra, limit: 2000000, period: 1s}}}\n",
		"",
		"  \n# only a comment\n\n",
	} {
		write(bad)
		testenv.WaitFor(t, 5*time.Second, fmt.Sprintf("bad file %q counted as a failed reload", bad), func() bool {
			return testenv.MetricValue(t, reg, "sluice_config_reloads_total", map[string]string{"result": "error"}) == float64(i+1)
		})
		select {
		case c := <-applied:
			t.Fatalf("bad file %q was applied: %+v", bad, c.Tenants)
		default:
		}
	}

	write("tenants: {a: {outflow: {rate: 9}}}\n")
	if got := next().Tenants["a"].Outflow.Rate; got != 9 {
		t.Fatalf("applied rate = %g, want 9", got)
	}
	if ok := testenv.MetricValue(t, reg, "sluice_config_reloads_total", map[string]string{"result": "ok"}); ok != 2 {
		t.Errorf("ok reloads = %g, want 2", ok)
	}

	// A missing file is reported once, not on every event in its folder
	// (a log file beside it fed a loop), and reloaded when it is back.
	errs := func() float64 {
		return testenv.MetricValue(t, reg, "sluice_config_reloads_total", map[string]string{"result": "error"})
	}
	before := errs()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "the missing file reported", func() bool { return errs() == before+1 })
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(dir, "other.log"), []byte(fmt.Sprint(i)), 0o600); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := errs(); n != before+1 {
		t.Errorf("failed reloads while the file was missing = %g, want 1 (reported once)", n-before)
	}
	write("tenants: {a: {outflow: {rate: 11}}}\n")
	if got := next().Tenants["a"].Outflow.Rate; got != 11 {
		t.Fatalf("applied rate after the file came back = %g, want 11", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
