package boot_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/internal/boot"
)

// TestServePprof: the pprof listener serves the profiles until its context
// ends, and nothing but them.
func TestServePprof(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := boot.ServePprof(ctx, "127.0.0.1:0", slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{
		"/debug/pprof/": http.StatusOK, "/debug/pprof/heap": http.StatusOK, "/debug/pprof/cmdline": http.StatusOK,
		"/metrics": http.StatusNotFound, "/v1/jobs": http.StatusNotFound,
	} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d; want %d", path, resp.StatusCode, want)
		}
	}
	if _, err := boot.ServePprof(ctx, addr, slog.Default()); err == nil {
		t.Errorf("a second listener on %s: no error", addr)
	}
}
