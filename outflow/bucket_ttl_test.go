package outflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/outflow"
)

// TestBucketTTLOnRedisClock: takes on Redis' clock (Take, now 0) leave the
// water hash with a TTL of at least the time it takes to empty plus the
// margin after every take, and at most 10 s more; a busy bucket's takes
// write one PEXPIRE, not one each (bucket_store's recorded "exp"). A take
// at an explicit clock clears the record, so the next take on Redis' clock
// sets the TTL again.
func TestBucketTTLOnRedisClock(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	tenant := testenv.Name(t, "ttl")
	l := outflow.NewBucket(rdb)
	lim := outflow.Limit{Rate: 1000, Capacity: 1000}
	pexpires := func() int64 { return testenv.CommandCalls(t, rdb, "pexpire") }
	before := pexpires()
	for i := range 200 {
		r, err := l.Take(ctx, tenant, lim, 1)
		if err != nil || !r.Allowed {
			t.Fatalf("take %d: %+v, %v", i, r, err)
		}
		ttl := rdb.PTTL(ctx, keys.Water(tenant)).Val()
		empty := time.Duration(r.Water/lim.Rate*float64(time.Second)) + outflow.Margin
		if ttl < empty-50*time.Millisecond || ttl > empty+10*time.Second+50*time.Millisecond {
			t.Fatalf("take %d: TTL %v, want between %v (empty + margin) and 10 s more", i, ttl, empty)
		}
	}
	if n := pexpires() - before; n != 1 {
		t.Errorf("200 takes within a second wrote %d PEXPIREs, want 1", n)
	}
	// A slow bucket whose emptying time outgrows the recorded expiry gets
	// its TTL set again: 30 takes at 1/s need 30 s + margin.
	slow := testenv.Name(t, "slow")
	for i := range 30 {
		r, err := l.Take(ctx, slow, outflow.Limit{Rate: 1, Capacity: 100}, 1)
		if err != nil || !r.Allowed {
			t.Fatalf("slow take %d: %+v, %v", i, r, err)
		}
		empty := time.Duration(r.Water*float64(time.Second)) + outflow.Margin
		if ttl := rdb.PTTL(ctx, keys.Water(slow)).Val(); ttl < empty-50*time.Millisecond {
			t.Fatalf("slow take %d: TTL %v, shorter than the %v the bucket takes to empty plus the margin", i, ttl, empty)
		}
	}
	// An exp this script cannot have written (beyond its longest TTL) is
	// not trusted: the next take sets the TTL again.
	if err := rdb.HSet(ctx, keys.Water(tenant), "exp", "99999999999999").Err(); err != nil {
		t.Fatal(err)
	}
	before = pexpires()
	if _, err := l.Take(ctx, tenant, lim, 1); err != nil {
		t.Fatal(err)
	}
	if n := pexpires() - before; n != 1 {
		t.Errorf("a take after a corrupt exp wrote %d PEXPIREs, want 1", n)
	}
	if _, err := l.TakeAt(ctx, tenant, lim, 1, time.Now()); err != nil {
		t.Fatal(err)
	}
	if exp := rdb.HGet(ctx, keys.Water(tenant), "exp").Val(); exp != "0" {
		t.Errorf("after a take at an explicit clock exp = %q, want 0", exp)
	}
	before = pexpires()
	if _, err := l.Take(ctx, tenant, lim, 1); err != nil {
		t.Fatal(err)
	}
	if n := pexpires() - before; n != 1 {
		t.Errorf("the take after it wrote %d PEXPIREs, want 1", n)
	}
}
