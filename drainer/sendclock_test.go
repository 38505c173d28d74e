package drainer

import (
	"testing"
	"time"
)

// TestSendClockMapsTurnsToTheLeastLatency: sends sit at turn + the least
// answer latency + sendMargin, whatever each answer's own latency; the
// offset falls at most clockSlew a second and rises only to a whole epoch's
// least; an answer without the bucket's clock teaches nothing.
func TestSendClockMapsTurnsToTheLeastLatency(t *testing.T) {
	var c sendClock
	base := time.Unix(1_796_600_000, 0)
	if got := c.sendAt(base, 0); !got.IsZero() {
		t.Fatalf("no answer yet: sendAt %v, want zero (send at the answer)", got)
	}
	c.observe(base.Add(300*time.Microsecond), time.Time{})
	if got := c.sendAt(base, 0); !got.IsZero() {
		t.Fatalf("an answer without a clock: sendAt %v, want zero", got)
	}

	// The first answer: 300 µs. A turn 40 ms ahead goes 300 µs + margin after it.
	c.observe(base.Add(300*time.Microsecond), base)
	want := base.Add(40*time.Millisecond + 300*time.Microsecond + sendMargin)
	if got := c.sendAt(base, 40*time.Millisecond); !got.Equal(want) {
		t.Fatalf("sendAt = %v, want %v", got, want)
	}
	// A slower answer (a burst's, 3 ms) does not move the sends: they stay
	// on the bucket's clock.
	at := base.Add(time.Second)
	c.observe(at.Add(3*time.Millisecond), at)
	if got, want := c.sendAt(at, 0), at.Add(300*time.Microsecond+sendMargin); !got.Equal(want) {
		t.Fatalf("after a slow answer sendAt = %v, want %v", got, want)
	}
	// A faster one, 2 s after the first: the offset falls by at most
	// clockSlew × 2 s (200 µs → 100 µs), not to 50 µs at once.
	at = base.Add(2 * time.Second)
	c.observe(at.Add(50*time.Microsecond), at)
	if got := c.offsetNow(); got < 100*time.Microsecond || got > 101*time.Microsecond {
		t.Fatalf("offset after a faster answer = %v, want about 100µs (slewed)", got)
	}
	// 10 s later it has reached the least.
	at = base.Add(12 * time.Second)
	c.observe(at.Add(50*time.Microsecond), at)
	if got, want := c.offsetNow(), 50*time.Microsecond; got != want {
		t.Fatalf("offset 10 s on = %v, want %v", got, want)
	}
	// Every answer of an epoch slower (the clocks drifting apart): the
	// offset rises to an epoch's least at the epoch's end.
	for i := range 25 {
		at = base.Add(13*time.Second + time.Duration(i)*time.Second)
		c.observe(at.Add(900*time.Microsecond+time.Duration(i)*time.Microsecond), at)
	}
	if got := c.offsetNow(); got < 900*time.Microsecond || got > 925*time.Microsecond {
		t.Fatalf("offset after 25 s of slower answers = %v, want an epoch's least, 900-925µs", got)
	}
}

// TestWaitSend: a dispatch waits for its send time, at most sendMargin, and
// reports a time already passed as late.
func TestWaitSend(t *testing.T) {
	if waitSend(time.Time{}) {
		t.Error("no send time: late, want not")
	}
	if !waitSend(time.Now().Add(-time.Millisecond)) {
		t.Error("a send time passed: not late, want late")
	}
	start := time.Now()
	if waitSend(start.Add(2 * time.Millisecond)) {
		t.Error("a send time ahead: late, want not")
	}
	if time.Since(start) < 2*time.Millisecond {
		t.Errorf("waited %v, want ≥ 2ms", time.Since(start))
	}
	start = time.Now()
	waitSend(start.Add(time.Hour))
	if w := time.Since(start); w < sendMargin || w > sendMargin+time.Second {
		t.Errorf("a send time an hour ahead: waited %v, want sendMargin (%v)", w, sendMargin)
	}
}

// offsetNow is the offset, for the tests.
func (c *sendClock) offsetNow() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}
