package config_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// TestPprofKeys: drainer.pprof and ingest.pprof_listen are off by default,
// set from the file or the environment, and validated.
func TestPprofKeys(t *testing.T) {
	t.Setenv("SLUICE_CONFIG", "")
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Drainer.Pprof || cfg.Ingest.PprofListen != "" {
		t.Errorf("defaults: drainer.pprof %v, ingest.pprof_listen %q; want false and \"\"", cfg.Drainer.Pprof, cfg.Ingest.PprofListen)
	}

	cfg, err = config.Parse([]byte("drainer: {pprof: true}\ningest: {pprof_listen: \"127.0.0.1:6060\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Drainer.Pprof || cfg.Ingest.PprofListen != "127.0.0.1:6060" {
		t.Errorf("from the file: drainer.pprof %v, ingest.pprof_listen %q", cfg.Drainer.Pprof, cfg.Ingest.PprofListen)
	}

	t.Setenv("SLUICE_DRAINER_PPROF", "true")
	t.Setenv("SLUICE_INGEST_PPROF_LISTEN", "127.0.0.1:6061")
	cfg, err = config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Drainer.Pprof || cfg.Ingest.PprofListen != "127.0.0.1:6061" {
		t.Errorf("from the environment: drainer.pprof %v, ingest.pprof_listen %q", cfg.Drainer.Pprof, cfg.Ingest.PprofListen)
	}
}

func TestPprofInvalid(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"pprof_listen not host:port", "ingest: {pprof_listen: nowhere}\n", `ingest.pprof_listen: must be host:port (got "nowhere")`},
		{"pprof_listen is the API's", "ingest: {listen: \"127.0.0.1:8080\", pprof_listen: \"127.0.0.1:8080\"}\n",
			`ingest.pprof_listen: must differ from ingest.listen ("127.0.0.1:8080")`},
		{"pprof not a bool", "drainer: {pprof: maybe}\n", "pprof"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}
