package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/config"
)

// TestOpsPprof: the ops listener serves /debug/pprof/ only when
// drainer.pprof is true, and the default is false.
func TestOpsPprof(t *testing.T) {
	t.Setenv("SLUICE_CONFIG", "")
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		pprof bool
		want  int
	}{
		{"default", cfg.Drainer.Pprof, http.StatusNotFound},
		{"drainer.pprof true", true, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(ops(nil, nil, prometheus.NewRegistry(), tc.pprof))
			defer srv.Close()
			for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
				resp, err := http.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("GET %s = %d; want %d", path, resp.StatusCode, tc.want)
				}
			}
		})
	}
}
