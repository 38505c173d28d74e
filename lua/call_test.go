package lua_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/lua"
)

// TestCallOutcomes: which failures of a call mean it never left
// (NeverSent), may have run (MayHaveRun), or got no reply (NoReply, the
// ones a held Kafka finish sends again).
func TestCallOutcomes(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	reply := testenv.Redis(t).Do(context.Background(), "NOSUCHCOMMAND").Err()
	read := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name                        string
		err                         error
		neverSent, mayHaveRun, none bool
	}{
		{"refused dial", dial, true, false, true},
		{"pool timeout", redis.ErrPoolTimeout, true, false, true},
		{"closed client", redis.ErrClosed, true, false, true},
		{"read timeout", read, false, true, true},
		{"cut connection", io.EOF, false, true, true},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), false, true, true},
		{"error reply", reply, false, false, false},
		{"reply of the wrong shape", lua.KafkaFinish.ReplyError("counter -1"), false, true, false},
	} {
		if got := lua.NeverSent(c.err); got != c.neverSent {
			t.Errorf("%s: NeverSent = %v, want %v", c.name, got, c.neverSent)
		}
		if got := lua.MayHaveRun(c.err); got != c.mayHaveRun {
			t.Errorf("%s: MayHaveRun = %v, want %v", c.name, got, c.mayHaveRun)
		}
		if got := lua.NoReply(c.err); got != c.none {
			t.Errorf("%s: NoReply = %v, want %v", c.name, got, c.none)
		}
	}
	if lua.NoReply(nil) {
		t.Error("NoReply(nil) = true")
	}
}
