package config

import (
	"runtime"
	"time"

	"github.com/spf13/viper"
)

// setDefaults registers every non-tenant key with its default, which also
// makes each one overridable by its SLUICE_* environment variable.
func setDefaults(v *viper.Viper) {
	for key, val := range map[string]any{
		"redis.addr":               "127.0.0.1:6379",
		"redis.cluster_addrs":      []string{},
		"redis.password":           "",
		"redis.db":                 0,
		"redis.timeout":            "250ms",
		"redis.pool_size":          10 * runtime.GOMAXPROCS(0),
		"queue.backend":            "redis",
		"kafka.brokers":            []string{"127.0.0.1:9092"},
		"kafka.topic":              "sluice.jobs",
		"kafka.partitions":         12,
		"kafka.replication_factor": 1,
		"kafka.dlq_topic":          "sluice.dlq",
		"kafka.batch_timeout":      "2ms",
		"kafka.produce_timeout":    "2s",
		"kafka.consumer_group":     "sluice-drainer",
		"ingest.listen":            "127.0.0.1:8080",
		"ingest.max_body_bytes":    1 << 20,
		"ingest.max_batch_jobs":    1000,
		"ingest.shutdown_timeout":  "10s",
		"ingest.retry_after":       "1s",
		"drainer.listen":           "127.0.0.1:8081",
		"drainer.lease":            "30s",
		"drainer.max_attempts":     10,
		"drainer.backoff_base":     "500ms",
		"drainer.backoff_max":      "5m",
		"drainer.shutdown_timeout": "30s",

		// The HTTP server's bounds on each client.
		"ingest.read_header_timeout": "10s",
		"ingest.body_timeout":        "30s",
		"ingest.write_timeout":       "10s",
		"ingest.idle_timeout":        "2m",
		"ingest.max_header_bytes":    64 << 10,
	} {
		v.SetDefault(key, val)
	}
}

// applyDefaults fills the per-tenant defaults that viper cannot express
// (tenants are a map of arbitrary names).
func (c *Config) applyDefaults() {
	for name, t := range c.Tenants {
		t.Admission.applyDefaults()
		for typ, jt := range t.JobTypes {
			jt.Admission.applyDefaults()
			if jt.Target.Timeout == 0 {
				jt.Target.Timeout = 10 * time.Second
			}
			t.JobTypes[typ] = jt
		}
		if t.Outflow.Capacity == 0 && t.Outflow.Rate > 0 {
			t.Outflow.Capacity = max(1, t.Outflow.Rate)
		}
		if t.Outflow.Adaptive == nil {
			on := true
			t.Outflow.Adaptive = &on
		}
		if t.Outflow.MinRate == 0 {
			t.Outflow.MinRate = t.Outflow.Rate / 10
		}
		if t.Target.Timeout == 0 {
			t.Target.Timeout = 10 * time.Second
		}
		if t.OnLimiterError == "" {
			t.OnLimiterError = "allow"
		}
		c.Tenants[name] = t
	}
}

func (a *Admission) applyDefaults() {
	if a.Algorithm == "" {
		return
	}
	if a.Period == 0 {
		a.Period = time.Second
	}
	if a.Burst == 0 {
		a.Burst = a.Limit
	}
}

// AdaptiveOn reports whether adaptive outflow is on (the default).
func (o Outflow) AdaptiveOn() bool { return o.Adaptive == nil || *o.Adaptive }
