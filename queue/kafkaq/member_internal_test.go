package kafkaq

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/segmentio/kafka-go"
)

// TestLeaveRetryable: a coordinator moving or loading and network errors
// are retried; UnknownMemberId, other broker errors and the caller's
// context ending are not.
func TestLeaveRetryable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want bool
	}{
		{kafka.NotCoordinatorForGroup, true},
		{fmt.Errorf("leave: %w", kafka.GroupLoadInProgress), true},
		{kafka.GroupCoordinatorNotAvailable, true},
		{&net.OpError{Op: "dial", Err: fmt.Errorf("refused")}, true},
		{io.EOF, true},
		{kafka.UnknownMemberId, false},
		{kafka.GroupAuthorizationFailed, false},
		{context.DeadlineExceeded, false},
		{fmt.Errorf("x: %w", context.Canceled), false},
	} {
		if got := leaveRetryable(c.err); got != c.want {
			t.Errorf("leaveRetryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
