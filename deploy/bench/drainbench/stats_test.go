package main

import (
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// paced returns n arrivals every gap from start, ids "<prefix><i>".
func paced(prefix string, start time.Time, n int, gap time.Duration) []arrival {
	out := make([]arrival, n)
	for i := range out {
		out[i] = arrival{at: start.Add(time.Duration(i) * gap), id: fmt.Sprint(prefix, i)}
	}
	return out
}

// bursts returns size arrivals at once every period, count times.
func bursts(start time.Time, count, size int, period time.Duration) []arrival {
	var out []arrival
	for k := range count {
		for j := range size {
			out = append(out, arrival{at: start.Add(time.Duration(k) * period), id: fmt.Sprint("b", k*size+j)})
		}
	}
	return out
}

func TestMeasureAccuracy(t *testing.T) {
	burstThenPaced := append(paced("burst", t0, 100, 0), paced("p", t0.Add(10*time.Millisecond), 1000, 10*time.Millisecond)...)
	tests := []struct {
		name             string
		arr              []arrival
		warmup, duration time.Duration
		target, capacity float64
		want             accuracy
	}{
		{
			name: "paced at the target", arr: paced("j", t0, 100, 100*time.Millisecond),
			warmup: 2 * time.Second, duration: 5 * time.Second, target: 10, capacity: 10,
			want: accuracy{Jobs: 50, Rate: 10, ErrPct: 0, MaxWindow: 10, MaxSteady: 10, BurstSpread: 900 * time.Millisecond, GapMean: 100 * time.Millisecond, GapP99: 100 * time.Millisecond},
		},
		{
			name: "paced 2 % slow", arr: paced("j", t0, 100, 102*time.Millisecond),
			warmup: 0, duration: 5 * time.Second, target: 10,
			want: accuracy{Jobs: 50, Rate: 1 / 0.102, ErrPct: (1/0.102 - 10) / 10 * 100, MaxWindow: 10, MaxSteady: 10, GapMean: 102 * time.Millisecond, GapP99: 102 * time.Millisecond},
		},
		{
			// BullMQ's fixed window: 10 at once every second; the slope
			// is the rate wherever the window's edges fall.
			name: "bursts of 10 every second", arr: bursts(t0, 12, 10, time.Second),
			warmup: 1500 * time.Millisecond, duration: 8 * time.Second, target: 10,
			want: accuracy{Jobs: 80, Rate: 10, MaxWindow: 10, MaxSteady: 10, GapMean: 7 * time.Second / 79,
				GapSD:  time.Duration(math.Sqrt(7*math.Pow(float64(time.Second)-float64(7*time.Second/79), 2)+72*math.Pow(float64(7*time.Second/79), 2)) / math.Sqrt(79)),
				GapP99: time.Second},
		},
		{
			name: "initial burst of capacity then the rate", arr: burstThenPaced,
			warmup: 2 * time.Second, duration: 5 * time.Second, target: 100, capacity: 100,
			want: accuracy{Jobs: 500, Rate: 100, MaxWindow: 199, MaxSteady: 100, GapMean: 10 * time.Millisecond, GapP99: 10 * time.Millisecond},
		},
		{
			name: "a job delivered twice", arr: append(paced("j", t0, 20, 100*time.Millisecond), arrival{at: t0.Add(2 * time.Second), id: "j3"}),
			warmup: 0, duration: 10 * time.Second, target: 10,
			want: accuracy{Jobs: 21, Rate: 10, MaxWindow: 10, MaxSteady: 10, GapMean: 100 * time.Millisecond, GapP99: 100 * time.Millisecond, Dups: 1},
		},
		{name: "nothing arrived", arr: nil, warmup: time.Second, duration: time.Second, target: 10, want: accuracy{}},
	}
	approx := cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-6*max(1, math.Abs(a)) })
	dur := cmp.Comparer(func(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond })
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := measureAccuracy(tc.arr, t0.Add(tc.warmup), tc.duration, tc.target, tc.capacity)
			if len(tc.arr) > 0 {
				tc.want.Warmup = tc.warmup
			}
			if diff := cmp.Diff(tc.want, got, approx, dur); diff != "" {
				t.Errorf("measureAccuracy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMeasureThroughput(t *testing.T) {
	tests := []struct {
		name string
		arr  []arrival
		want throughput
	}{
		{"1001 jobs over 1 s", paced("j", t0, 1001, time.Millisecond), throughput{Jobs: 1001, Elapsed: time.Second, Rate: 1000}},
		{"one job", paced("j", t0, 1, 0), throughput{Jobs: 1}},
		{"a duplicate", append(paced("j", t0, 3, time.Second), arrival{at: t0.Add(4 * time.Second), id: "j0"}),
			throughput{Jobs: 4, Dups: 1, Elapsed: 4 * time.Second, Rate: 0.75}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, measureThroughput(tc.arr), cmp.AllowUnexported(throughput{})); diff != "" {
				t.Errorf("measureThroughput (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMaxInWindow(t *testing.T) {
	tests := []struct {
		name         string
		arr          []arrival
		want, wantAt int
	}{
		{"empty", nil, 0, 0},
		{"paced 10/s: the window is half-open", paced("j", t0, 30, 100*time.Millisecond), 10, 0},
		{"two bursts 999 ms apart", append(bursts(t0, 1, 5, 0), bursts(t0.Add(999*time.Millisecond), 1, 5, 0)...), 10, 0},
		{"two bursts 1 s apart", bursts(t0, 2, 5, time.Second), 5, 0},
		{"a denser second later", append(paced("a", t0, 5, 200*time.Millisecond), paced("b", t0.Add(time.Second), 8, 100*time.Millisecond)...), 9, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got, at := maxInWindowAt(tc.arr, time.Second); got != tc.want || at != tc.wantAt {
				t.Errorf("maxInWindowAt = %d at %d, want %d at %d", got, at, tc.want, tc.wantAt)
			}
		})
	}
}

func TestParseHOL(t *testing.T) {
	out := `goos: linux
BenchmarkHeadOfLineRedis-2   	     500	  10234567 ns/op	        3.21 p50_ms	        9.87 p99_ms	    1234 B/op
BenchmarkHeadOfLineKafka-2   	     500	  10234567 ns/op	        4.50 p50_ms	       20.00 p99_ms
BenchmarkDrainerThroughputRedis-2 1000 100 ns/op 5000 jobs/s
BenchmarkHeadOfLineBroken-2   	     500	  10234567 ns/op
PASS`
	want := []holRow{{name: "BenchmarkHeadOfLineRedis", jobs: 500, p50: 3.21, p99: 9.87}, {name: "BenchmarkHeadOfLineKafka", jobs: 500, p50: 4.5, p99: 20}}
	if diff := cmp.Diff(want, parseHOL(out), cmp.AllowUnexported(holRow{})); diff != "" {
		t.Errorf("parseHOL (-want +got):\n%s", diff)
	}
}

// TestDrainerConfValid checks that the generated configuration is one
// config.Parse accepts, with the outflow the benchmark states.
func TestDrainerConfValid(t *testing.T) {
	tests := []struct {
		name         string
		c            drainerConf
		wantRate     float64
		wantCapacity float64
	}{
		{"redis, rate 100", drainerConf{redisAddr: "127.0.0.1:6379", backend: "redis", listen: "127.0.0.1:9101",
			tenants: []string{"bench-1"}, rate: 100, sinkURL: "http://127.0.0.1:9100/hook"}, 100, 100},
		{"redis, rate 0.5: capacity 1", drainerConf{redisAddr: "127.0.0.1:6379", backend: "redis", listen: "127.0.0.1:9101",
			tenants: []string{"bench-1"}, rate: 0.5, sinkURL: "http://127.0.0.1:9100/hook"}, 0.5, 1},
		{"kafka, unlimited, two tenants", drainerConf{redisAddr: "127.0.0.1:6379", backend: "kafka", brokers: []string{"127.0.0.1:9092"},
			topic: "sluice-bench", group: "bench", listen: "127.0.0.1:9101", tenants: []string{"bench-t0", "bench-t1"},
			sinkURL: "http://127.0.0.1:9100/hook"}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.c.yaml()))
			if err != nil {
				t.Fatalf("config.Parse of\n%s\n= %v", tc.c.yaml(), err)
			}
			if cfg.Queue.Backend != tc.c.backend || cfg.Drainer.Listen != tc.c.listen {
				t.Errorf("backend, listen = %q, %q; want %q, %q", cfg.Queue.Backend, cfg.Drainer.Listen, tc.c.backend, tc.c.listen)
			}
			if tc.c.backend == "kafka" && (cfg.Kafka.Topic != tc.c.topic || cfg.Kafka.DLQTopic != tc.c.topic+dlqSuffix || cfg.Kafka.ConsumerGroup != tc.c.group) {
				t.Errorf("kafka topic, dlq_topic, group = %q, %q, %q; want %q, %q, %q", cfg.Kafka.Topic, cfg.Kafka.DLQTopic, cfg.Kafka.ConsumerGroup,
					tc.c.topic, tc.c.topic+dlqSuffix, tc.c.group)
			}
			if len(cfg.Tenants) != len(tc.c.tenants) {
				t.Fatalf("%d tenants, want %d", len(cfg.Tenants), len(tc.c.tenants))
			}
			for _, name := range tc.c.tenants {
				tn := cfg.Tenants[name]
				got := []any{tn.Outflow.Rate, tn.Outflow.Capacity, tn.Target.URL}
				want := []any{tc.wantRate, tc.wantCapacity, tc.c.sinkURL}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("tenant %s rate, capacity, target (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

func TestLoadOptions(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		name    string
		env     map[string]string
		want    string // a summary of the parsed options
		wantErr bool
	}{
		{"full defaults", nil, "1m0s 2s [10 100 1000] [1 3 8] 100000 [1 3] [1 12] c16 500 private", false},
		{"quick defaults", map[string]string{"BENCH_QUICK": "1"}, "5s 2s [10 1000] [1 3] 10000 [1] [1] c16 100 private", false},
		{"the shared Redis", map[string]string{"BENCH_REDIS": "shared", "SLUICE_TEST_REDIS": "127.0.0.1:7777"}, "1m0s 2s [10 100 1000] [1 3 8] 100000 [1 3] [1 12] c16 500 127.0.0.1:7777", false},
		{"overrides", map[string]string{"BENCH_QUICK": "1", "BENCH_DURATION": "60s", "BENCH_RATES": "100", "BENCH_WORKERS": "8",
			"BENCH_BULLMQ_CONCURRENCY": "1", "BENCH_REDIS": "127.0.0.1:7000"}, "1m0s 2s [100] [8] 10000 [1] [1] c1 100 127.0.0.1:7000", false},
		{"bad duration", map[string]string{"BENCH_DURATION": "soon"}, "", true},
		{"bad workers", map[string]string{"BENCH_WORKERS": "1,0"}, "", true},
		{"bad system", map[string]string{"BENCH_SYSTEMS": "sluice,celery"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := loadOptions(env(tc.env), "/repo")
			if tc.wantErr {
				if err == nil {
					t.Fatalf("loadOptions = nil error, want one")
				}
				return
			}
			if err != nil {
				t.Fatalf("loadOptions: %v", err)
			}
			got := fmt.Sprintf("%s %s %v %v %d %v %v c%d %d %s", o.duration, o.warmup, o.rates, o.workers, o.tputJobs,
				o.tputWorkers, o.tputTenants, o.bullConcurrency, o.holJobs, firstNonEmpty(o.redisAddr, "private"))
			if got != tc.want {
				t.Errorf("options = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMaxSent: a start-up burst that takes longer to reach the sink than
// the paced jobs after it fills a 1-s window at the sink with one more
// job than the throttle sent in any 1-s window; a delivery without a send
// time makes the figure unmeasured.
func TestMaxSent(t *testing.T) {
	var arr []arrival
	for i := range 10 { // the burst: sent at t0, arrives 150 ms later
		arr = append(arr, arrival{sent: t0, at: t0.Add(150 * time.Millisecond), id: fmt.Sprint("b", i)})
	}
	for k := 1; k <= 20; k++ { // 10/s after it, 1 ms on the way
		sent := t0.Add(time.Duration(k) * 100 * time.Millisecond)
		arr = append(arr, arrival{sent: sent, at: sent.Add(time.Millisecond), id: fmt.Sprint("p", k)})
	}
	sort.Slice(arr, func(i, j int) bool { return arr[i].at.Before(arr[j].at) }) // as recorder.take
	if got := maxSent(arr); got != 19 {
		t.Errorf("maxSent = %d, want 19 (the burst and the 9 sent in the rest of its second)", got)
	}
	if got := maxInWindow(arr, time.Second); got != 20 {
		t.Errorf("maxInWindow at the sink = %d, want 20", got)
	}
	arr[3].sent = time.Time{}
	if got := maxSent(arr); got != 0 {
		t.Errorf("maxSent with an arrival lacking its send time = %d, want 0", got)
	}
}

// TestSentGapSD: jobs sent exactly every 100 ms whose delivery takes 1 or
// 21 ms in turn have gaps of 80 and 120 ms at the sink (SD 20 ms) and an
// inter-dispatch gap SD of 0.
func TestSentGapSD(t *testing.T) {
	var arr []arrival
	for i := range 50 {
		sent := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		lat := time.Millisecond + time.Duration(i%2)*20*time.Millisecond
		arr = append(arr, arrival{sent: sent, at: sent.Add(lat), id: fmt.Sprint("j", i)})
	}
	got := measureAccuracy(arr, t0, 10*time.Second, 10, 10)
	if (got.GapSD-20*time.Millisecond).Abs() > 100*time.Microsecond || got.SentGapSD != 0 {
		t.Errorf("GapSD %v, SentGapSD %v; want 20ms (49 gaps: within 0.1 ms) and 0", got.GapSD, got.SentGapSD)
	}
	arr[7].sent = time.Time{}
	if got := measureAccuracy(arr, t0, 10*time.Second, 10, 10); got.SentGapSD != 0 || got.MaxSent != 0 {
		t.Errorf("a job without a send time: SentGapSD %v, MaxSent %d; want both 0 (not measured)", got.SentGapSD, got.MaxSent)
	}
}
