package tenants_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/tenants"
)

// exampleRedis connects to the Redis the tests use (SLUICE_TEST_REDIS,
// default 127.0.0.1:6379).
func exampleRedis() *redis.Client {
	addr := os.Getenv("SLUICE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

// A merge patch changes only the fields it names; null gives a field its
// default back.
func ExampleApplyPatch() {
	cur := config.Tenant{Outflow: config.Outflow{Rate: 5, Capacity: 5}}.WithDefaults()
	next, err := tenants.ApplyPatch("acme", cur, []byte(`{"outflow":{"rate":20,"capacity":null,"min_rate":null}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	next = next.WithDefaults()
	fmt.Println(next.Outflow.Rate, next.Outflow.Capacity, next.Outflow.MinRate)
	b, _ := tenants.EncodeSpec(config.Tenant{Admission: config.Admission{Algorithm: "gcra", Limit: 10, Period: time.Second, Burst: 5}})
	fmt.Println(string(b))
	_, err = tenants.DecodeSpec("acme", []byte(`{"outflow":{"rte":1}}`))
	fmt.Println(err)
	// Output:
	// 20 20 2
	// {"admission":{"algorithm":"gcra","burst":5,"limit":10,"period":"1s"},"api_keys":[],"on_limiter_error":""}
	// tenants.acme.outflow.rte: unknown field
}

// A Registry in every process: the file's tenants plus the admin changes,
// applied to the service (here: printed) whenever either changes.
func ExampleRegistry() {
	rdb := exampleRedis()
	defer rdb.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	id := "example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer rdb.Del(context.Background(), keys.Override(id), keys.Audit(id))
	defer rdb.SRem(context.Background(), keys.Tenants(), id)

	base, err := config.Parse([]byte("tenants:\n  " + id + ": {outflow: {rate: 5}}\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: base})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := reg.Sync(ctx); err != nil {
		fmt.Println(err)
		return
	}
	rates := make(chan float64, 10)
	go reg.Run(ctx, func(c *config.Config) { rates <- c.Tenants[id].Outflow.Rate })
	fmt.Println("running with rate", <-rates)

	res, err := reg.Patch(ctx, id, []byte(`{"outflow":{"rate":20}}`), "alice", time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("stored version", res.Version, "from", res.Source)
	fmt.Println("applied rate", <-rates)
	// Output:
	// running with rate 5
	// stored version 1 from runtime
	// applied rate 20
}
