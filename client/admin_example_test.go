package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/client"
)

func ExampleAdmin_PatchTenant() {
	admin := client.NewAdmin("http://127.0.0.1:8080", "local-admin")
	// Raise acme's outflow to 20 jobs/s on every drainer; other keys stay.
	t, err := admin.PatchTenant(context.Background(), "acme",
		map[string]any{"outflow": map[string]any{"rate": 20, "capacity": 20}})
	if err != nil {
		fmt.Println("not changed:", err) // *client.Error: Status, Detail, Field
		return
	}
	fmt.Println(t.ID, "version", t.Version, "outflow", t.Spec.Outflow.Rate)
}

func ExampleAdmin_PutTenant() {
	admin := client.NewAdmin("http://127.0.0.1:8080", "local-admin")
	_, created, err := admin.PutTenant(context.Background(), "initech", client.TenantSpec{
		APIKeys:   []string{"sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
		Admission: client.Admission{Algorithm: "gcra", Limit: 10, Period: client.Duration(time.Second), Burst: 5},
		Outflow:   client.Outflow{Rate: 5},
		Target:    client.Target{URL: "http://127.0.0.1:9000/hook"},
	})
	if err != nil {
		fmt.Println("not stored:", err)
		return
	}
	fmt.Println("created:", created)
}

func ExampleAdmin_Audit() {
	admin := client.NewAdmin("http://127.0.0.1:8080", "local-admin")
	entries, err := admin.Audit(context.Background(), "acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range entries {
		fmt.Println(e.At.Format(time.RFC3339), e.Who, e.Action, len(e.Changes), "fields changed")
	}
}

func ExampleAdmin_AuditPage() {
	admin := client.NewAdmin("http://127.0.0.1:8080", "local-admin")
	// The newest 20 changes; pass page.NextCursor for the 20 before them.
	page, err := admin.AuditPage(context.Background(), "acme", 20, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range page.Entries {
		for _, c := range e.Changes {
			fmt.Println(e.Version, e.Who, c.Path)
		}
	}
	fmt.Println("more:", page.NextCursor != "")
}

func ExampleClient_Stats() {
	c := client.New("http://127.0.0.1:8080", "acme-secret-key")
	st, err := c.Stats(context.Background(), "acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("backlog %d, outflow %.1f/s of %.1f/s\n", st.Backlog, st.Outflow.MeasuredRate, st.Outflow.ConfiguredRate)
}

func ExampleClient_Job() {
	c := client.New("http://127.0.0.1:8080", "acme-secret-key")
	js, err := c.Job(context.Background(), "0194f3a2c1d2e3f4a5b6c7d8e9f0a1b2")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(js.State)
	if js.State == client.StateQueued {
		if _, err := c.Cancel(context.Background(), js.JobID); err != nil {
			fmt.Println("too late:", err) // 409 once it is in flight
		}
	}
}

func ExampleNewAdmin() {
	admin := client.NewAdmin("http://127.0.0.1:8080", "local-admin")
	tenants, err := admin.Tenants(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tenants {
		fmt.Println(t.ID, t.Source, t.Spec.Outflow.Rate)
	}
}
