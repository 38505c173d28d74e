package dlq_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/queue/redisq"
)

func ExampleStore_List() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	prod, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := dlq.New(dlq.Config{Redis: rdb, Producer: prod})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	page, err := st.List(ctx, "acme", 20, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range page.Items {
		fmt.Println(it.JobID, it.Reason, it.FailedAt.Format(time.RFC3339))
	}
	// Put the first page back on acme's queue.
	ids := make([]string, len(page.Items))
	for i, it := range page.Items {
		ids[i] = it.JobID
	}
	res, err := st.Redrive(ctx, "acme", ids)
	fmt.Println(res.Redriven, res.Skipped, err)
}

func ExampleCut() {
	s, cut := dlq.Cut("naïve", 3) // ï is two bytes: the cut falls before it
	fmt.Printf("%q %v\n", s, cut)
	// Output: "na" true
}
