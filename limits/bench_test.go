package limits

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// The benchmarks compare sluice's admission with github.com/go-redis/
// redis_rate/v10 on the same Redis, in the same run:
//
//	go test -run '^$' -bench . ./limits/
//
// Both run 64 goroutines (SetParallelism(32) on 2 CPUs; 32 × GOMAXPROCS in
// general) over one client with a pool of 64 connections, spread over 64
// tenants with keys of the same shape ("sluice:{tenant}:..."), with limits
// so high that every decision admits (sliding_log's limit is lower only to
// bound its sorted sets; it still admits everything at these rates). Each
// reports decisions/s besides ns/op. Nothing is flushed: tenants are fresh
// and every key has a TTL of about a second.

const benchParallelism = 32 // × GOMAXPROCS goroutines: 64 on 2 CPUs

func benchClient(b *testing.B) *redis.Client {
	b.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b), PoolSize: 64})
	b.Cleanup(func() { rdb.Close() })
	return rdb
}

func benchTenants(b *testing.B) []string {
	b.Helper()
	out := make([]string, 64)
	for i := range out {
		out[i] = testenv.Name(b, "bench") + "-" + strconv.Itoa(i)
	}
	return out
}

// benchParallel runs decide from 64 goroutines and reports decisions/s.
func benchParallel(b *testing.B, tenants []string, decide func(ctx context.Context, tenant string) error) {
	b.Helper()
	ctx := context.Background()
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(tenants))
		for pb.Next() {
			i = (i + 1) % len(tenants)
			if err := decide(ctx, tenants[i]); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

// benchPolicy admits everything at benchmark rates.
func benchPolicy(alg Algorithm) Policy {
	p := Policy{Name: "tenant", Algorithm: alg, Limit: 1_000_000, Period: time.Second}
	if alg == AlgSlidingLog {
		p.Limit = 10_000
	}
	return p
}

// BenchmarkAdmit measures one-policy decisions per algorithm, batched (the
// default), plus GCRA unbatched.
func BenchmarkAdmit(b *testing.B) {
	rdb := benchClient(b)
	run := func(name string, p Policy, opts ...Option) {
		b.Run(name, func(b *testing.B) {
			a := admNew(b, rdb, opts...)
			req := []Policy{p}
			benchParallel(b, benchTenants(b), func(ctx context.Context, tenant string) error {
				d, err := a.Admit(ctx, Request{Tenant: tenant, Policies: req})
				if err == nil && !d.Allowed {
					b.Fatalf("%s refused: %+v", name, d)
				}
				return err
			})
		})
	}
	for _, alg := range Algorithms {
		run(string(alg), benchPolicy(alg))
	}
	run("gcra_unbatched", benchPolicy(AlgGCRA), WithBatching(false))
}

// BenchmarkRedisRate is redis_rate's GCRA under the same load as
// BenchmarkAdmit: one EVALSHA per decision, no batching.
func BenchmarkRedisRate(b *testing.B) {
	rdb := benchClient(b)
	limiter := redis_rate.NewLimiter(rdb)
	limit := redis_rate.PerSecond(1_000_000)
	benchParallel(b, benchTenants(b), func(ctx context.Context, tenant string) error {
		res, err := limiter.Allow(ctx, "sluice:{"+tenant+"}:redis_rate", limit)
		if err == nil && res.Allowed == 0 {
			b.Fatalf("redis_rate refused: %+v", res)
		}
		return err
	})
}

// BenchmarkAdmitSerial is the latency of one decision with no concurrency,
// batched and unbatched: what the batcher costs a lone caller.
func BenchmarkAdmitSerial(b *testing.B) {
	rdb := benchClient(b)
	for _, mode := range admModes {
		b.Run(mode.name, func(b *testing.B) {
			a := admNew(b, rdb, mode.opts...)
			tenant := testenv.Name(b, "bench")
			req := Request{Tenant: tenant, Policies: []Policy{benchPolicy(AlgGCRA)}}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := a.Admit(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLocal is the in-process fail-open limiter.
func BenchmarkLocal(b *testing.B) {
	l := NewLocal(benchPolicy(AlgGCRA))
	now := time.Unix(1000, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.AllowN(now, 1)
		}
	})
}
