package drainer

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/jobstate"
)

// TestStartReplyNeverDropsOnAnUnexpectedReply: only the script's 0 (cancelled)
// and -1 (a duplicate) drop a job; an attempt >= 1 delivers; every other reply (another integer, a string, nil, an array, an
// error value) delivers and is reported unexpected, so it is counted.
func TestStartReplyNeverDropsOnAnUnexpectedReply(t *testing.T) {
	t.Parallel()
	tests := []struct {
		reply       any
		deliver, ok bool
	}{
		{int64(1), true, true},
		{int64(0), false, true},
		{int64(2), true, true},
		{int64(-1), false, true},
		{int64(-2), true, false},
		{"1", true, false},
		{"cancelled", true, false},
		{nil, true, false},
		{[]any{int64(0)}, true, false},
		{errors.New("boom"), true, false},
	}
	for _, tc := range tests {
		deliver, err := jobstate.StartReply(tc.reply)
		if ok := err == nil; deliver != tc.deliver || ok != tc.ok {
			t.Errorf("StartReply(%#v) = deliver %v, ok %v; want deliver %v, ok %v", tc.reply, deliver, ok, tc.deliver, tc.ok)
		}
	}
}
