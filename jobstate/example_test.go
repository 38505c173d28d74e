package jobstate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// exampleRedis is the shared test Redis (deploy/local/services.sh up).
func exampleRedis() *redis.Client {
	addr := os.Getenv("SLUICE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

// exampleEnqueue queues jobs of tenant through the Redis producer (which
// records them as queued) and returns a cleanup.
func exampleEnqueue(ctx context.Context, rdb *redis.Client, tenant string, ids ...string) func() {
	p, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	var envs []queue.Envelope
	del := []string{keys.Queue(tenant), keys.Backlog(tenant), keys.JobSeq(tenant), keys.JobsDispatched(tenant),
		keys.Delivering(tenant), keys.Outflow(tenant), keys.Processing(tenant), keys.Leased(tenant)}
	for _, id := range ids {
		envs = append(envs, queue.Envelope{ID: id, Tenant: tenant, Type: "email", Cost: 1})
		del = append(del, keys.JobState(tenant, id))
	}
	rdb.Del(ctx, del...)
	if err := p.Enqueue(ctx, envs); err != nil {
		log.Fatal(err)
	}
	return func() { rdb.Del(ctx, del...) }
}

// ExampleGet reads the state and queue position of two queued jobs.
func ExampleGet() {
	ctx := context.Background()
	rdb := exampleRedis()
	defer rdb.Close()
	defer exampleEnqueue(ctx, rdb, "example-get", "welcome", "reminder")()

	for _, id := range []string{"welcome", "reminder"} {
		r, err := jobstate.Get(ctx, rdb, "example-get", id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s, %d ahead\n", r.JobID, r.State, r.Ahead)
	}
	_, err := jobstate.Get(ctx, rdb, "example-get", "unknown")
	fmt.Println(errors.Is(err, jobstate.ErrNotFound))
	// Output:
	// welcome: queued, 0 ahead
	// reminder: queued, 1 ahead
	// true
}

// ExampleCancel cancels a queued job; a second cancel is refused with the
// job's state.
func ExampleCancel() {
	ctx := context.Background()
	rdb := exampleRedis()
	defer rdb.Close()
	defer exampleEnqueue(ctx, rdb, "example-cancel", "newsletter")()

	fmt.Println(jobstate.Cancel(ctx, rdb, "example-cancel", "newsletter"))
	var conflict *jobstate.ConflictError
	if err := jobstate.Cancel(ctx, rdb, "example-cancel", "newsletter"); errors.As(err, &conflict) {
		fmt.Println("refused:", conflict.State)
	}
	// Output:
	// <nil>
	// refused: cancelled
}

// A Dispatch's Call is what a drainer records when a delivery starts: the
// job goes in flight, unless it was cancelled after its claim (StartReply
// false).
func ExampleDispatch_Call() {
	ctx := context.Background()
	rdb := exampleRedis()
	defer rdb.Close()
	defer exampleEnqueue(ctx, rdb, "example-start", "invoice")()

	c, err := redisq.NewConsumer(redisq.ConsumerConfig{Redis: rdb, Lease: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	job, _, err := c.Claim(ctx, "example-start")
	if err != nil || job == nil {
		log.Fatal(job, err)
	}
	v, err := jobstate.Dispatch{
		Tenant: "example-start", JobID: job.Envelope.ID, Member: job.Token(),
		Attempt: job.Envelope.Attempt + 1, Lease: time.Minute,
	}.Call().Run(ctx, rdb).Result()
	if err != nil {
		log.Fatal(err)
	}
	ok, err := jobstate.StartReply(v)
	if err != nil {
		log.Fatal(err)
	}
	r, _ := jobstate.Get(ctx, rdb, "example-start", "invoice")
	fmt.Println(ok, r.State, r.Attempt)
	if err := c.Finish(ctx, job, queue.Outcome{}); err != nil {
		log.Fatal(err)
	}
	r, _ = jobstate.Get(ctx, rdb, "example-start", "invoice")
	fmt.Println(r.State)
	// Output:
	// true in_flight 1
	// done
}
