package client_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/client"
)

func ExampleAdmin_DeadLetters() {
	admin := client.NewAdmin("http://127.0.0.1:8080", "local-admin")
	ctx := context.Background()
	// Every dead letter of acme, newest first, a page at a time.
	for cursor := ""; ; {
		p, err := admin.DeadLetters(ctx, "acme", 100, cursor)
		if err != nil {
			fmt.Println("not listed:", err)
			return
		}
		for _, d := range p.Jobs {
			fmt.Println(d.JobID, d.Reason, d.Status, d.LastError, d.Excerpt)
		}
		if p.NextCursor == "" {
			return
		}
		cursor = p.NextCursor
	}
}

func ExampleAdmin_Redrive() {
	admin := client.NewAdmin("http://127.0.0.1:8080", "local-admin")
	// Once the sink is fixed: the jobs go back on acme's queue with the same
	// ids, and their next delivery is Sluice-Attempt 1.
	r, err := admin.Redrive(context.Background(), "acme", []string{"order-1234", "order-1235"})
	if err != nil {
		fmt.Println("not redriven:", err)
		return
	}
	fmt.Println("redriven", r.Redriven, "skipped", len(r.Skipped))
}
