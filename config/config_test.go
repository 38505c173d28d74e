package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
)

func TestLoadExample(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("../configs/sluice.example.yaml")
	if err != nil {
		t.Fatalf("Load example: %v", err)
	}
	acme, ok := cfg.Tenants["acme"]
	if !ok {
		t.Fatalf("tenant acme missing; got %v", cfg.Tenants)
	}
	want := config.Admission{Algorithm: "gcra", Limit: 10, Period: time.Second, Burst: 5}
	if diff := cmp.Diff(want, acme.Admission); diff != "" {
		t.Errorf("acme admission (-want +got):\n%s", diff)
	}
	enc := acme.JobTypes["encode"].Admission
	if enc.Algorithm != "fixed_window" || enc.Limit != 2 || enc.Period != time.Minute || enc.Burst != 2 {
		t.Errorf("encode admission = %+v, want fixed_window 2/1m burst 2", enc)
	}
	if acme.APIKeys[0] != config.HashKey("acme-secret-key") {
		t.Errorf("acme key hash = %s, want HashKey(acme-secret-key)", acme.APIKeys[0])
	}
	if g := cfg.Tenants["globex"]; g.Outflow.Capacity != 2 || g.OnLimiterError != "deny" || !g.Outflow.AdaptiveOn() {
		t.Errorf("globex defaults = %+v", g)
	}
	if cfg.Kafka.BatchTimeout != 100*time.Microsecond || cfg.Drainer.MaxAttempts != 10 {
		t.Errorf("defaults: batch_timeout %s, max_attempts %d", cfg.Kafka.BatchTimeout, cfg.Drainer.MaxAttempts)
	}
}

func TestLoadDefaultsOnly(t *testing.T) {
	t.Setenv("SLUICE_CONFIG", "")
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Addr != "127.0.0.1:6379" || cfg.Queue.Backend != "redis" || cfg.Ingest.MaxBodyBytes != 1<<20 {
		t.Errorf("defaults = %+v", cfg)
	}
	if k := cfg.Kafka; k.ReplicationFactor != 0 || k.MinInsyncReplicas != 0 {
		t.Errorf("kafka.replication_factor %d, min_insync_replicas %d; want 0 and 0 (auto: min(3, brokers); 2 from 3 replicas)",
			k.ReplicationFactor, k.MinInsyncReplicas)
	}
	in := cfg.Ingest
	got := []any{in.ReadHeaderTimeout, in.BodyTimeout, in.WriteTimeout, in.IdleTimeout, in.MaxHeaderBytes}
	want := []any{10 * time.Second, 30 * time.Second, 10 * time.Second, 2 * time.Minute, 64 << 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("client bounds: read_header, body, write, idle timeouts, max_header_bytes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{720 * time.Hour, int64(100_000)}, []any{in.MaxDelay, in.MaxScheduled}); diff != "" {
		t.Errorf("max_delay, max_scheduled (-want +got):\n%s", diff)
	}
}

// TestMaxJobCost: ingest.max_job_cost defaults to 1,000,000 and takes any
// value from 1 to 1,000,000,000 (TestInvalid refuses 0 and 10^9 + 1).
func TestMaxJobCost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		yaml string
		want int64
	}{
		{"", config.DefaultMaxJobCost},
		{"ingest: {max_job_cost: 1}\n", 1},
		{"ingest: {max_job_cost: 1000000000}\n", config.MaxMaxJobCost},
	} {
		cfg, err := config.Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.yaml, err)
		}
		if cfg.Ingest.MaxJobCost != tc.want {
			t.Errorf("Parse(%q): max_job_cost = %d, want %d", tc.yaml, cfg.Ingest.MaxJobCost, tc.want)
		}
	}
	if config.DefaultMaxJobCost != 1_000_000 || config.MaxMaxJobCost != 1_000_000_000 {
		t.Errorf("DefaultMaxJobCost, MaxMaxJobCost = %d, %d; want 10^6, 10^9", config.DefaultMaxJobCost, config.MaxMaxJobCost)
	}
}

func TestEnvOverrides(t *testing.T) {
	t.Setenv("SLUICE_REDIS_ADDR", "10.1.2.3:6380")
	t.Setenv("SLUICE_QUEUE_BACKEND", "kafka")
	t.Setenv("SLUICE_KAFKA_BROKERS", "127.0.0.1:1,127.0.0.1:2")
	t.Setenv("SLUICE_INGEST_SHUTDOWN_TIMEOUT", "3s")
	t.Setenv("SLUICE_KAFKA_REPLICATION_FACTOR", "3")
	t.Setenv("SLUICE_KAFKA_MIN_INSYNC_REPLICAS", "2")
	cfg, err := config.Parse([]byte("redis: {addr: 127.0.0.1:6379}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Redis.Addr != "10.1.2.3:6380" {
		t.Errorf("redis.addr = %q, want the env value", cfg.Redis.Addr)
	}
	if diff := cmp.Diff([]string{"127.0.0.1:1", "127.0.0.1:2"}, cfg.Kafka.Brokers); diff != "" {
		t.Errorf("kafka.brokers (-want +got):\n%s", diff)
	}
	if cfg.Queue.Backend != "kafka" || cfg.Ingest.ShutdownTimeout != 3*time.Second {
		t.Errorf("backend %q shutdown %s", cfg.Queue.Backend, cfg.Ingest.ShutdownTimeout)
	}
	if got := [2]int{cfg.Kafka.ReplicationFactor, cfg.Kafka.MinInsyncReplicas}; got != [2]int{3, 2} {
		t.Errorf("kafka.replication_factor, min_insync_replicas = %v, want the env values [3 2]", got)
	}
}

// TestReplicationKeys: redis.sentinel and redis.wait_* default to off,
// load from the file, and take their SLUICE_* overrides (addrs as a comma
// list).
func TestReplicationKeys(t *testing.T) {
	cfg, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(config.Redis{Addr: "127.0.0.1:6379", ClusterAddrs: []string{}, Timeout: 250 * time.Millisecond,
		PoolSize: cfg.Redis.PoolSize, Sentinel: config.Sentinel{Addrs: []string{}}, WaitTimeout: 100 * time.Millisecond}, cfg.Redis); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	if cfg.Redis.Sentinel.Enabled() {
		t.Errorf("Sentinel.Enabled() = true by default")
	}
	cfg, err = config.Parse([]byte("redis: {sentinel: {master_name: m, addrs: [127.0.0.1:26379, 127.0.0.1:26380], password: s}, wait_replicas: 2, wait_timeout: 50ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Sentinel{MasterName: "m", Addrs: []string{"127.0.0.1:26379", "127.0.0.1:26380"}, Password: "s"}
	if diff := cmp.Diff(want, cfg.Redis.Sentinel); diff != "" || cfg.Redis.WaitReplicas != 2 || cfg.Redis.WaitTimeout != 50*time.Millisecond {
		t.Errorf("file: sentinel (-want +got):\n%s; wait_replicas %d, wait_timeout %s", diff, cfg.Redis.WaitReplicas, cfg.Redis.WaitTimeout)
	}

	t.Setenv("SLUICE_REDIS_SENTINEL_MASTER_NAME", "main")
	t.Setenv("SLUICE_REDIS_SENTINEL_ADDRS", "10.0.0.1:26379,10.0.0.2:26379")
	t.Setenv("SLUICE_REDIS_WAIT_REPLICAS", "1")
	t.Setenv("SLUICE_REDIS_WAIT_TIMEOUT", "20ms")
	if cfg, err = config.Parse(nil); err != nil {
		t.Fatal(err)
	}
	want = config.Sentinel{MasterName: "main", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"}}
	if diff := cmp.Diff(want, cfg.Redis.Sentinel); diff != "" || cfg.Redis.WaitReplicas != 1 || cfg.Redis.WaitTimeout != 20*time.Millisecond {
		t.Errorf("env: sentinel (-want +got):\n%s; wait_replicas %d, wait_timeout %s", diff, cfg.Redis.WaitReplicas, cfg.Redis.WaitTimeout)
	}
}

func TestConfigFileFromEnv(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte("ingest: {listen: 127.0.0.1:9999}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLUICE_CONFIG", p)
	cfg, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ingest.Listen != "127.0.0.1:9999" {
		t.Errorf("listen = %q", cfg.Ingest.Listen)
	}
}

func TestTenantNameCaseKept(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
tenants:
  AcMe:
    admission: {algorithm: gcra, limit: 1}
    job_types: {Encode: {admission: {algorithm: fixed_window, limit: 1, period: 1m}}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Tenants["AcMe"].JobTypes["Encode"]; !ok {
		t.Errorf("tenants = %+v, want AcMe with job type Encode", cfg.Tenants)
	}
}

// TestInvalid checks that every bad value stops the load with its key named.
func TestInvalid(t *testing.T) {
	t.Parallel()
	hash := config.HashKey("k")
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown top key", "redis: {adr: x}\n", "adr"},
		{"unknown tenant key", "tenants: {a: {admision: {limit: 1}}}\n", "admision"},
		{"unknown algorithm", "tenants: {a: {admission: {algorithm: magic, limit: 1}}}\n", `tenants.a.admission.algorithm: unknown algorithm "magic"`},
		{"zero limit", "tenants: {a: {admission: {algorithm: gcra, limit: 0}}}\n", "tenants.a.admission.limit: must be >= 1"},
		{"period without algorithm", "tenants: {a: {admission: {period: 100ns}}}\n", "tenants.a.admission.algorithm: must be set when a limit, burst or period is given"},
		{"negative rate", "tenants: {a: {outflow: {rate: -1}}}\n", "tenants.a.outflow.rate: must be > 0 units per second (got -1); to stop delivery, pause the tenant"},
		{"bad backend", "queue: {backend: rabbit}\n", `queue.backend: must be redis or kafka (got "rabbit")`},
		{"batch timeout not below the produce timeout", "kafka: {batch_timeout: 2s, produce_timeout: 2s}\n", "kafka.batch_timeout: must be a positive duration below kafka.produce_timeout 2s (got 2s)"},
		{"batch timeout 0", "kafka: {batch_timeout: 0s}\n", "kafka.batch_timeout: must be a positive duration below kafka.produce_timeout 2s (got 0s)"},
		{"heartbeat not below the session", "kafka: {session_timeout: 6s, heartbeat_interval: 6s}\n", "kafka.heartbeat_interval: must be > 0 and below kafka.session_timeout 6s (got 6s)"},
		{"instance id with a space", "kafka: {instance_id: \"a b\"}\n", `kafka.instance_id: must be auto, none or 1 to 128 characters of [A-Za-z0-9._:-], not "." or ".." (got "a b")`},
		{"session timeout 0", "kafka: {session_timeout: 0s}\n", "kafka.session_timeout: must be from 6s to 30m, the broker's default group.min/max.session.timeout.ms (got 0s)"},
		{"negative revoke timeout", "kafka: {revoke_timeout: -1s}\n", "kafka.revoke_timeout: must be 0 (the longest target.timeout + 1s) or up to 1h (got -1s)"},
		{"negative replication factor", "kafka: {replication_factor: -1}\n", "kafka.replication_factor: must be 0 (min(3, brokers)) to 32 (got -1)"},
		{"replication factor 33", "kafka: {replication_factor: 33}\n", "kafka.replication_factor: must be 0 (min(3, brokers)) to 32 (got 33)"},
		{"negative min insync", "kafka: {min_insync_replicas: -1}\n", "kafka.min_insync_replicas: must be 0 (2 when the replication factor is >= 3) to 32 (got -1)"},
		{"min insync above rf", "kafka: {replication_factor: 2, min_insync_replicas: 3}\n", "kafka.min_insync_replicas: must be at most kafka.replication_factor 2 (got 3)"},
		{"bad key hash", "tenants: {a: {api_keys: [plain]}}\n", "tenants.a.api_keys[0]: must be \"sha256:\""},
		{"duplicate key", "tenants: {a: {api_keys: [" + hash + "]}, b: {api_keys: [" + hash + "]}}\n", "same key as"},
		{"bad tenant id", "tenants: {\"a b\": {}}\n", "tenants.a b: tenant id must be 1 to 64 characters"},
		{"tenant id .", "tenants: {\".\": {}}\n", `tenants..: tenant id must be 1 to 64 characters of [A-Za-z0-9._-], not "." or ".."`},
		{"tenant id ..", "tenants: {\"..\": {}}\n", `(got "..")`},
		{"dotted tenant id", "tenants: {\"a.b\": {admission: {algorithm: gcra, limit: 1}}}\n", `tenants.a.b: a name with "." cannot be written in the configuration file`},
		{"tenant id _other", "tenants: {_other: {}}\n", `tenants._other: tenant id must be 1 to 64 characters of [A-Za-z0-9._-], not "." or "..", not starting with "_" (reserved for sluice's own labels) (got "_other")`},
		{"job type ..", "tenants: {a: {job_types: {\"..\": {}}}}\n", `tenants.a.job_types...: job type must be 1 to 128 characters of [A-Za-z0-9._:-], not "." or ".." (got "..")`},
		{"gcra limit above period µs", "tenants: {acme: {admission: {algorithm: gcra, limit: 2000000, period: 1s}}}\n",
			"tenants.acme.admission.limit: must be <= 1000000, one unit per µs of period 1s (got 2000000)"},
		{"gcra burst 2^63-1", "tenants: {acme: {admission: {algorithm: gcra, limit: 10, burst: 9223372036854775807}}}\n",
			"tenants.acme.admission.burst: must be <= 9007199254: burst × period (1000000 µs) must stay below 2^53 (got 9223372036854775807)"},
		{"period 2562047h", "tenants: {acme: {admission: {algorithm: fixed_window, limit: 10, period: 2562047h}}}\n",
			"tenants.acme.admission.period: must be <= 8784h0m0s (366 days) (got 2562047h0m0s)"},
		{"job type sliding_log 2^40 per 1h", "tenants: {acme: {job_types: {enc: {admission: {algorithm: sliding_log, limit: 1099511627776, period: 1h}}}}}\n",
			"tenants.acme.job_types.enc.admission.limit: must be <= 3600000000"},
		{"max_backlog above 2^53", "tenants: {a: {outflow: {rate: 1, max_backlog: 9007199254740992}}}\n", "tenants.a.outflow.max_backlog: must be between 0 and 9007199254740991 (got 9007199254740992)"},
		{"concurrency above the maximum", "tenants: {a: {outflow: {rate: 1, concurrency: 1000001}}}\n", "tenants.a.outflow.concurrency: must be between 0 and 1000000 (got 1000001)"},
		{"max_batch_jobs above the maximum", "ingest: {max_batch_jobs: 100001}\n", "ingest.max_batch_jobs: must be between 1 and 100000 (got 100001)"},
		{"bad url", "tenants: {a: {target: {url: ftp://x}}}\n", "tenants.a.target.url: must be an absolute http or https URL"},
		{"url port out of range", "tenants: {a: {target: {url: \"http://x:99999/\"}}}\n", "tenants.a.target.url: port must be 1 to 65535"},
		{"duration without unit", "tenants: {a: {admission: {algorithm: gcra, limit: 1, period: 5}}}\n", "period"},
		{"bad duration", "redis: {timeout: soon}\n", "timeout"},
		{"bad on_limiter_error", "tenants: {a: {on_limiter_error: maybe}}\n", "tenants.a.on_limiter_error: must be allow or deny"},
		{"bad listen", "ingest: {listen: nowhere}\n", "ingest.listen: must be host:port"},
		{"max_delay zero", "ingest: {max_delay: 0s}\n", "ingest.max_delay: must be a duration between 1s and 8760h0m0s (got 0s)"},
		{"max_delay above its bound", "ingest: {max_delay: 8761h}\n", "ingest.max_delay: must be a duration between 1s and 8760h0m0s (got 8761h0m0s)"},
		{"max_scheduled zero", "ingest: {max_scheduled: 0}\n", "ingest.max_scheduled: must be >= 1 (got 0)"},
		{"max_job_cost zero", "ingest: {max_job_cost: 0}\n", "ingest.max_job_cost: must be between 1 and 1000000000 (got 0)"},
		{"max_job_cost above its bound", "ingest: {max_job_cost: 1000000001}\n", "ingest.max_job_cost: must be between 1 and 1000000000 (got 1000000001)"},
		{"case-only duplicate tenants", "tenants: {a: {}, A: {}}\n", "differing only in case"},
		{"not yaml", "redis: [\n", "parse yaml"},
		{"zero write timeout", "ingest: {write_timeout: 0s}\n", "ingest.write_timeout: must be a duration from 1ns to 1h0m0s (got 0s)"},
		{"negative body timeout", "ingest: {body_timeout: -1s}\n", "ingest.body_timeout: must be a duration from 1ns to 1h0m0s (got -1s)"},
		{"absurd idle timeout", "ingest: {idle_timeout: 1000h}\n", "ingest.idle_timeout: must be a duration from 1ns to 1h0m0s"},
		{"zero read header timeout", "ingest: {read_header_timeout: 0s}\n", "ingest.read_header_timeout: must be"},
		{"tiny header limit", "ingest: {max_header_bytes: 10}\n", "ingest.max_header_bytes: must be from 1024 to 16777216 (got 10)"},
		{"sentinel name without addrs", "redis: {sentinel: {master_name: m}}\n", "redis.sentinel.addrs: must name at least one Sentinel when redis.sentinel.master_name is set"},
		{"sentinel addrs without name", "redis: {sentinel: {addrs: [127.0.0.1:26379]}}\n", "redis.sentinel.master_name: must be set when redis.sentinel.addrs is"},
		{"sentinel with cluster", "redis: {cluster_addrs: [127.0.0.1:7000], sentinel: {master_name: m, addrs: [127.0.0.1:26379]}}\n", "redis.sentinel: cannot be used with redis.cluster_addrs"},
		{"bad sentinel addr", "redis: {sentinel: {master_name: m, addrs: [nowhere]}}\n", "redis.sentinel.addrs[0]: must be host:port"},
		{"unknown sentinel key", "redis: {sentinel: {master: m}}\n", "master"},
		{"wait_replicas negative", "redis: {wait_replicas: -1}\n", "redis.wait_replicas: must be between 0 (off) and 16 (got -1)"},
		{"wait_replicas above 16", "redis: {wait_replicas: 17}\n", "redis.wait_replicas: must be between 0 (off) and 16 (got 17)"},
		{"wait_replicas with cluster", "redis: {cluster_addrs: [127.0.0.1:7000], wait_replicas: 1}\n", "redis.wait_replicas: cannot be used with redis.cluster_addrs"},
		{"wait_timeout zero", "redis: {wait_timeout: 0s}\n", "redis.wait_timeout: must be a duration from 1ms to 10s (got 0s)"},
		{"wait_timeout above 10s", "redis: {wait_timeout: 11s}\n", "redis.wait_timeout: must be a duration from 1ms to 10s (got 11s)"},
		{"wait_timeout not below timeout", "redis: {wait_replicas: 1, timeout: 200ms, wait_timeout: 200ms}\n", "redis.wait_timeout: must be at most half of redis.timeout 200ms"},
		{"wait_timeout above half the timeout", "redis: {wait_replicas: 1, timeout: 250ms, wait_timeout: 126ms}\n", "redis.wait_timeout: must be at most half of redis.timeout 250ms"},
		{"absurd header limit", "ingest: {max_header_bytes: 1073741824}\n", "ingest.max_header_bytes: must be from 1024 to 16777216"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want one containing %q", tc.yaml, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) error:\n%v\nwant it to contain %q", tc.yaml, err, tc.want)
			}
		})
	}
}

func ExampleLoad() {
	cfg, err := config.Load("../configs/sluice.example.yaml")
	if err != nil {
		panic(err)
	}
	a := cfg.Tenants["acme"].Admission
	println(a.Algorithm, a.Limit)
}

// TestTargetTimeoutZeroRefused: a target timeout spelled out as 0 (or
// negative) is refused naming the key, where it would otherwise read as
// absent and mean 10s; an absent timeout still defaults to 10s.
func TestTargetTimeoutZeroRefused(t *testing.T) {
	const hint = "must be above 0 (got %s); leave it out for the default 10s"
	for _, tc := range []struct{ name, yaml, key, got string }{
		{"tenant 0s", "tenants: {a: {target: {url: 'http://x/h', timeout: 0s}}}\n", "tenants.a.target.timeout", "0s"},
		{"tenant negative", "tenants: {a: {target: {url: 'http://x/h', timeout: -5s}}}\n", "tenants.a.target.timeout", "-5s"},
		{"job type 0ms", "tenants: {a: {job_types: {enc: {target: {url: 'http://x/h', timeout: 0ms}}}}}\n", "tenants.a.job_types.enc.target.timeout", "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			want := "config: " + tc.key + ": " + fmt.Sprintf(hint, tc.got)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, want)
			}
		})
	}
	cfg, err := config.Parse([]byte("tenants: {a: {target: {url: 'http://x/h'}, job_types: {enc: {target: {url: 'http://x/e'}}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Tenants["a"]; a.Target.Timeout != 10*time.Second || a.JobTypes["enc"].Target.Timeout != 10*time.Second {
		t.Errorf("absent timeouts = %v and %v, want the default 10s", a.Target.Timeout, a.JobTypes["enc"].Target.Timeout)
	}
}

// TestAdmissionPeriodZeroRefused: a period spelled out as 0 (or negative)
// is refused naming the key, in the file and in a SLUICE_* override; an
// absent period still defaults to 1s.
func TestAdmissionPeriodZeroRefused(t *testing.T) {
	const hint = "must be >= 1ms (got %s); leave it out for the default 1s"
	for _, tc := range []struct{ name, yaml, key, got string }{
		{"tenant 0s", "tenants: {a: {admission: {algorithm: gcra, limit: 5, period: 0s}}}\n", "tenants.a.admission.period", "0s"},
		{"tenant 0ms", "tenants: {a: {admission: {algorithm: gcra, limit: 5, period: 0ms}}}\n", "tenants.a.admission.period", "0s"},
		{"tenant negative", "tenants: {a: {admission: {algorithm: gcra, limit: 5, period: -1s}}}\n", "tenants.a.admission.period", "-1s"},
		{"job type 0s", "tenants: {a: {job_types: {enc: {admission: {algorithm: fixed_window, limit: 5, period: 0s}}}}}\n", "tenants.a.job_types.enc.admission.period", "0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tc.yaml))
			want := "config: " + tc.key + ": " + fmt.Sprintf(hint, tc.got)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", tc.yaml, err, want)
			}
		})
	}
	cfg, err := config.Parse([]byte("tenants: {a: {admission: {algorithm: gcra, limit: 5}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Tenants["a"].Admission.Period; p != time.Second {
		t.Errorf("absent period = %v, want the default 1s", p)
	}
	t.Setenv("SLUICE_TENANTS_A_ADMISSION_PERIOD", "0s")
	_, err = config.Parse([]byte("tenants: {a: {admission: {algorithm: gcra, limit: 5, period: 2s}}}\n"))
	if want := "tenants.a.admission.period: " + fmt.Sprintf(hint, "0s"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Parse with SLUICE_TENANTS_A_ADMISSION_PERIOD=0s = %v, want an error containing %q", err, want)
	}
}
