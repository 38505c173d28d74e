package lua

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestExecWait: with Replicas 0 ExecWait is Exec; on a server without
// replicas WAIT 1 answers 0 after its timeout and ExecWait returns an
// error wrapping ErrWaitShort, the calls having run.
func TestExecWait(t *testing.T) {
	ctx := context.Background()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	defer rdb.Close()
	incr := New(testenv.Name(t, "incr")+".lua", "-- incr\nreturn redis.call('INCR', KEYS[1])")
	call := []Call{{Script: incr, Keys: []string{"n"}}}

	cmds, err := ExecWait(ctx, rdb, call, Wait{})
	if n, cerr := cmds[0].Int64(); err != nil || cerr != nil || n != 1 {
		t.Fatalf("ExecWait without replicas asked = %d, %v, %v; want 1, nil", n, cerr, err)
	}
	start := time.Now()
	cmds, err = ExecWait(ctx, rdb, call, Wait{Replicas: 1, Timeout: 20 * time.Millisecond})
	if !errors.Is(err, ErrWaitShort) {
		t.Errorf("ExecWait 1 replica on a lone server: %v, want ErrWaitShort", err)
	}
	if n, cerr := cmds[0].Int64(); cerr != nil || n != 2 {
		t.Errorf("the call of a short WAIT = %d, %v; want it run (2)", n, cerr)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("a short WAIT returned after %v, before its 20ms timeout", d)
	}
}
