package queue_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/queue"
)

func ExampleEnvelope_Encode() {
	e := queue.Envelope{
		Version: queue.EnvelopeVersion, ID: "job-1", Tenant: "acme", Type: "email",
		Payload: json.RawMessage(`{"to":"ops@example.com"}`), Cost: 1,
		EnqueuedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	}
	b, _ := e.Encode()
	fmt.Println(string(b))
	// Output:
	// {"v":1,"id":"job-1","tenant":"acme","type":"email","payload":{"to":"ops@example.com"},"cost":1,"attempt":0,"enqueued_at":"2026-03-01T12:00:00Z"}
}

func ExampleDecode() {
	e, err := queue.Decode([]byte(`{"v":1,"id":"job-1","tenant":"acme","cost":2,"enqueued_at":"2026-03-01T12:00:00Z"}`))
	fmt.Println(e.ID, e.Tenant, e.Cost, err)
	_, err = queue.Decode([]byte(`{"v":9,"id":"job-1","tenant":"acme"}`))
	fmt.Println(errors.Is(err, queue.ErrUnknownVersion))
	// Output:
	// job-1 acme 2 <nil>
	// true
}
