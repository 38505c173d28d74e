// Package clock is sluice's one abstraction of the time it reads: every
// component that needs the time of day (deadlines, enqueued_at, ETAs,
// latencies, the instant passed to a script) takes a Clock in its config,
// nil meaning the system clock. At the script boundary time stays an
// argument, where zero means "read Redis TIME": the shared clock of all
// instances, so production passes zero and tests pass fixed instants.
package clock

import "time"

// Clock reads the current time.
type Clock interface {
	Now() time.Time
}

// Real is the system clock (time.Now).
var Real Clock = system{}

type system struct{}

func (system) Now() time.Time { return time.Now() }

// Or returns c, or Real when c is nil: the default every component applies.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// Func adapts a function to a Clock.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }
