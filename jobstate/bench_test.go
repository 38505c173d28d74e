package jobstate_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
)

func BenchmarkStart(b *testing.B) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	tenant := testenv.Name(b, "jsb")
	b.Cleanup(func() {
		rdb.Del(context.Background(), keys.JobsDispatched(tenant), keys.Delivering(tenant), keys.Outflow(tenant))
	})
	d := jobstate.Dispatch{Tenant: tenant, JobID: "j", Member: "j|1", Attempt: 1, Lease: time.Minute}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := startRun(ctx, rdb, d); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	rdb := testenv.Redis(b)
	ctx := context.Background()
	tenant := testenv.Name(b, "jsb")
	enqueue(b, rdb, tenant, "j")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := jobstate.Get(ctx, rdb, tenant, "j"); err != nil {
			b.Fatal(err)
		}
	}
}
