package client_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sluicehq/sluice/client"
)

func ExampleClient_Submit() {
	c := client.New("http://127.0.0.1:8080", "acme-secret-key")
	acc, err := c.Submit(context.Background(), client.Job{
		Type:    "email",
		Payload: json.RawMessage(`{"to":"a@example.com"}`),
	})
	if err != nil {
		fmt.Println("not queued:", err)
		return
	}
	fmt.Println("queued", acc.JobID)
}
