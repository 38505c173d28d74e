package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/scheduler"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/redisq"
)

// Example schedules a job a little ahead, runs a Scheduler (as every
// drainer does) until the job is on its tenant's queue, and shows that a
// scheduled job can be cancelled while it waits.
func Example() {
	ctx := context.Background()
	addr := os.Getenv("SLUICE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	const t = "example-sched"
	rdb.Del(ctx, keys.Queue(t), keys.JobIndex(t, "scheduled"), keys.ScheduledJobs(t), keys.ScheduledMoving(t),
		keys.JobState(t, "soon"), keys.JobState(t, "never"))
	defer rdb.ZRem(ctx, keys.ScheduledTenants(), t)

	due := time.Now().Add(300 * time.Millisecond)
	job := func(id string) scheduler.Job {
		return scheduler.Job{Due: due, Envelope: queue.Envelope{Version: queue.EnvelopeVersion, ID: id, Tenant: t,
			Type: "report", Cost: 1, EnqueuedAt: time.Now(), NotBefore: &due}}
	}
	if err := scheduler.Add(ctx, rdb, t, []scheduler.Job{job("soon"), job("never")}, 100); err != nil {
		fmt.Println(err)
		return
	}
	cancelled, _, _ := scheduler.Cancel(ctx, rdb, t, "never")
	fmt.Println("cancelled:", cancelled)

	producer, _ := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	s, _ := scheduler.New(scheduler.Config{Redis: rdb, Producer: producer})
	runCtx, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Run(runCtx, func() []string { return []string{t} }, func(tenant string) {
			fmt.Println("moved jobs of", tenant)
			stop()
		})
	}()
	<-done
	queued, _ := rdb.LLen(ctx, keys.Queue(t)).Result()
	fmt.Println("queued:", queued, "on time:", !time.Now().Before(due))
	// Output:
	// cancelled: true
	// moved jobs of example-sched
	// queued: 1 on time: true
}
