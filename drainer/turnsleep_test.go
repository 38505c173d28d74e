package drainer

import (
	"testing"
	"time"
)

// TestTurnSleepAsksBeforeTheTurn: after a refused take a lane wakes
// turnLead before its turn falls due, inside turnAhead, so the next take is
// granted the turn for a send at its own time and a late ask costs no
// outflow; the sleep stays within the bounds of a lane's wait.
func TestTurnSleepAsksBeforeTheTurn(t *testing.T) {
	for _, wait := range []time.Duration{turnAhead + time.Microsecond, 150 * time.Millisecond, time.Second, 9 * time.Second} {
		got := turnSleep(wait)
		if lead := wait - got; lead <= 0 || lead > turnAhead {
			t.Errorf("turnSleep(%v) = %v: asks %v before the turn, want in (0, %v]", wait, got, lead, turnAhead)
		}
	}
	for wait, want := range map[time.Duration]time.Duration{
		time.Microsecond: outflowWaitMin, turnLead: outflowWaitMin, time.Hour: outflowWaitMax,
	} {
		if got := turnSleep(wait); got != want {
			t.Errorf("turnSleep(%v) = %v, want %v", wait, got, want)
		}
	}
}
