package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSaveMetrics: a drainer's /metrics is written next to its log before
// it is stopped; a process without an ops listener, or one that does not
// answer, leaves no file.
func TestSaveMetrics(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("sluice_retries_total{tenant=\"a\"} 3\n"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	p := &proc{name: "drainer", log: filepath.Join(dir, "d.log"), addr: strings.TrimPrefix(srv.URL, "http://")}
	p.saveMetrics()
	b, err := os.ReadFile(p.log + ".metrics")
	if err != nil || string(b) != "sluice_retries_total{tenant=\"a\"} 3\n" {
		t.Errorf("saved metrics = %q, %v; want the served text", b, err)
	}

	for _, q := range []*proc{
		{name: "bullmq", log: filepath.Join(dir, "b.log")},
		{name: "gone", log: filepath.Join(dir, "g.log"), addr: "127.0.0.1:1"},
	} {
		q.saveMetrics()
		if _, err := os.Stat(q.log + ".metrics"); !os.IsNotExist(err) {
			t.Errorf("%s: a metrics file was written (%v)", q.name, err)
		}
	}
}
