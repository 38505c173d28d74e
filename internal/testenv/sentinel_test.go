package testenv

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStartSentinel checks the topology itself: a write on the primary
// reaches the replica, a killed primary is replaced by the replica with the
// write, a failover client follows it, and the old primary started again
// rejoins as a replica of the new one.
func TestStartSentinel(t *testing.T) {
	h := StartSentinel(t)
	ctx := t.Context()
	if got := h.PrimaryAddr(); got != h.Primary().Addr() {
		t.Fatalf("PrimaryAddr() = %s at start, want the primary %s", got, h.Primary().Addr())
	}
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: h.MasterName(), SentinelAddrs: h.SentinelAddrs(),
		MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	if n, err := c.Wait(ctx, 1, time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 1000 = %d, %v; want 1 replica", n, err)
	}

	h.KillPrimary()
	promoted := h.WaitFailover(20 * time.Second)
	if promoted != h.Replica().Addr() {
		t.Fatalf("WaitFailover() = %s, want the replica %s", promoted, h.Replica().Addr())
	}
	WaitFor(t, 10*time.Second, "the failover client on the new primary", func() bool {
		got, err := c.Get(ctx, "k").Result()
		return err == nil && got == "v"
	})

	h.Primary().Start()
	// The old primary rejoins as a replica. On a loaded host the new
	// primary can miss the Sentinels' 1-s down-after while it forks for the
	// resync, and they fail over once more, back to the old one: either
	// way the pair must end as one primary, named by every Sentinel, and
	// its replica, with the write.
	pair := []string{h.Primary().Addr(), h.Replica().Addr()}
	WaitFor(t, 40*time.Second, "the old primary back in the pair as a replica", func() bool {
		m := ""
		for _, addr := range h.SentinelAddrs() {
			got, err := sentinelMaster(addr)
			if err != nil || (m != "" && got != m) {
				return false
			}
			m = got
		}
		other := pair[0]
		if m == other {
			other = pair[1]
		}
		return (m == pair[0] || m == pair[1]) && isMaster(m) && replicaOf(other) == m
	})
	WaitFor(t, 10*time.Second, "the write read through the failover client", func() bool {
		got, err := c.Get(ctx, "k").Result()
		return err == nil && got == "v"
	})
}
