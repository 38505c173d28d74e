package boot_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/boot"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
)

// TestSlowScriptNotSentTwice: a script call whose reply comes after the
// client's timeout is not sent again by the client, alone or in a
// pipeline: it runs once, and the caller sees an outcome it does not know
// (lua.MayHaveRun). Before, go-redis sent it once more after the read
// timeout (MaxRetries 1): a submit whose first run queued the job ran
// again, was refused by the limit its first run had charged, and answered
// 429 for a queued job (then released the client's id).
func TestSlowScriptNotSentTwice(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t)
	rdb := boot.Redis(config.Redis{Addr: proc.Addr(), Timeout: 100 * time.Millisecond, PoolSize: 4})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	slow := slowScript
	for _, pipelined := range []bool{false, true} {
		key := "replay:" + testenv.Name(t, "k")
		var err error
		if pipelined {
			cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Eval(ctx, slow, []string{key})
				p.Get(ctx, key)
				return nil
			})
			err = cmds[0].Err()
		} else {
			err = rdb.Eval(ctx, slow, []string{key}).Err()
		}
		if err == nil || !lua.MayHaveRun(err) {
			t.Errorf("pipelined %v: err %v, want a timeout (an outcome not known)", pipelined, err)
		}
		time.Sleep(700 * time.Millisecond) // a second send, if any, has run by now
		if n, _ := rdb.Get(ctx, key).Int(); n != 1 {
			t.Errorf("pipelined %v: the script ran %d times, want once", pipelined, n)
		}
	}
}

// TestSlowScriptNotSentTwiceOnCluster is TestSlowScriptNotSentTwice on a
// Redis Cluster client, whose own resend (MaxRedirects, default 3) ignored
// MaxRetries: the script ran twice.
func TestSlowScriptNotSentTwiceOnCluster(t *testing.T) {
	t.Parallel()
	rdb := boot.Redis(config.Redis{ClusterAddrs: testenv.ClusterAddrs(t), Timeout: 100 * time.Millisecond, PoolSize: 4})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	key := "replay:{" + testenv.Name(t, "k") + "}"
	if err := rdb.Eval(ctx, slowScript, []string{key}).Err(); err == nil || !lua.MayHaveRun(err) {
		t.Errorf("err %v, want a timeout (an outcome not known)", err)
	}
	time.Sleep(700 * time.Millisecond)
	if n, _ := rdb.Get(ctx, key).Int(); n != 1 {
		t.Errorf("the script ran %d times, want once", n)
	}
}

// slowScript INCRs KEYS[1], then keeps Redis busy for 300 ms: three of the
// tests' timeouts long.
const slowScript = `redis.call('INCR', KEYS[1])
local t = redis.call('TIME')
local stop = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 300000
repeat t = redis.call('TIME') until tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop
return 1`
