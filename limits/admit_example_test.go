package limits_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
)

// admitExampleRedis connects to the Redis the tests use (SLUICE_TEST_REDIS,
// default 127.0.0.1:6379); examples cannot take a *testing.T.
func admitExampleRedis() *redis.Client {
	addr := os.Getenv("SLUICE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

// admitExampleTenant is a tenant no other run uses.
func admitExampleTenant() string {
	return "example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// The GCRA timeline of the reference article: one request per second with a
// burst of five (T = 1 s, τ = 5 s), at explicit instants.
func ExampleNewAdmitter() {
	rdb := admitExampleRedis()
	defer rdb.Close()
	ctx := context.Background()

	a, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	tenant := admitExampleTenant()
	p := limits.Policy{Name: "tenant", Algorithm: limits.AlgGCRA, Limit: 1, Period: time.Second, Burst: 5}
	for _, s := range []float64{10, 11, 12, 12, 12, 12, 12.1, 12.1} {
		now := time.UnixMicro(int64(s * 1e6))
		d, err := a.Admit(ctx, limits.Request{Tenant: tenant, Policies: []limits.Policy{p}, Now: now})
		if err != nil {
			fmt.Println(err)
			return
		}
		r := d.Results[0]
		fmt.Printf("%4.1fs allowed=%-5v remaining=%d retry_after=%v\n", s, d.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// 10.0s allowed=true  remaining=4 retry_after=0s
	// 11.0s allowed=true  remaining=4 retry_after=0s
	// 12.0s allowed=true  remaining=4 retry_after=0s
	// 12.0s allowed=true  remaining=3 retry_after=0s
	// 12.0s allowed=true  remaining=2 retry_after=0s
	// 12.0s allowed=true  remaining=1 retry_after=0s
	// 12.1s allowed=true  remaining=0 retry_after=0s
	// 12.1s allowed=false remaining=0 retry_after=900ms
}

// A job of type "encode" must pass the tenant's policy, the type's policy
// and the tenant's backlog gate; here the type's policy refuses the third
// job, and the tenant's policy is not charged for it.
func ExampleAdmitter_Admit() {
	rdb := admitExampleRedis()
	defer rdb.Close()
	ctx := context.Background()
	a, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	tenant := admitExampleTenant()
	rdb.Set(ctx, keys.Backlog(tenant), 3, keys.BacklogTTL) // normally kept by the queue
	req := limits.Request{
		Tenant: tenant,
		Policies: []limits.Policy{
			{Name: "tenant", Algorithm: limits.AlgTokenBucket, Limit: 100, Period: time.Minute},
			{Name: "type.encode", Algorithm: limits.AlgFixedWindow, Limit: 2, Period: time.Hour},
		},
		Cost:       1,
		MaxBacklog: 1000,
	}
	for range 3 {
		d, err := a.Admit(ctx, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%-5v violated=%q backlog=%d tenant_remaining=%d type_remaining=%d\n",
			d.Allowed, d.Violated, d.Backlog, d.Results[0].Remaining, d.Results[1].Remaining)
	}
	// Output:
	// allowed=true  violated="" backlog=3 tenant_remaining=99 type_remaining=1
	// allowed=true  violated="" backlog=3 tenant_remaining=98 type_remaining=0
	// allowed=false violated="type.encode" backlog=3 tenant_remaining=98 type_remaining=0
}

// Each algorithm enforcing "2 per hour" on its own: the third request in a
// row is refused, whatever the algorithm.
func Example_algorithms() {
	rdb := admitExampleRedis()
	defer rdb.Close()
	a, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, alg := range limits.Algorithms {
		p := limits.Policy{Name: "tenant", Algorithm: alg, Limit: 2, Period: time.Hour}
		tenant := admitExampleTenant()
		fmt.Printf("%-14s", alg)
		for range 3 {
			d, err := a.Admit(context.Background(), limits.Request{Tenant: tenant, Policies: []limits.Policy{p}})
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Print(" ", d.Allowed)
		}
		fmt.Println()
	}
	// Output:
	// fixed_window   true true false
	// sliding_window true true false
	// gcra           true true false
	// token_bucket   true true false
	// sliding_log    true true false
}

// Local needs no Redis: ingest's rough bound while Redis is down.
func ExampleNewLocal() {
	l := limits.NewLocal(limits.Policy{Name: "tenant", Algorithm: limits.AlgGCRA, Limit: 10, Period: time.Second, Burst: 2})
	now := time.Unix(1000, 0)
	for _, at := range []time.Duration{0, 0, 0, 100 * time.Millisecond} {
		r := l.AllowN(now.Add(at), 1)
		fmt.Printf("+%v allowed=%v remaining=%d retry_after=%v\n", at, r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Output:
	// +0s allowed=true remaining=1 retry_after=0s
	// +0s allowed=true remaining=0 retry_after=0s
	// +0s allowed=false remaining=0 retry_after=100ms
	// +100ms allowed=true remaining=0 retry_after=0s
}

func ExamplePolicy_Validate() {
	p := limits.Policy{Name: "type.encode", Algorithm: limits.AlgGCRA, Limit: 0, Period: time.Second}
	fmt.Println(p.Validate())
	// Output: limits: policy type.encode: limit: must be >= 1 (got 0)
}
