package drainer

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/testenv"
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
	// The jobs of one answer: later shifts the shared base, and keeps zero.
	if got, want := later(c.sendAt(base, 0), 40*time.Millisecond), c.sendAt(base, 40*time.Millisecond); !got.Equal(want) {
		t.Fatalf("later(base, 40ms) = %v, want sendAt's %v", got, want)
	}
	if got := later(time.Time{}, time.Second); !got.IsZero() {
		t.Fatalf("later of no send time = %v, want zero", got)
	}
	// A slower answer (a burst's, 3 ms) does not move the sends: they stay
	// on the bucket's clock.
	at := base.Add(time.Second)
	c.observe(at.Add(3*time.Millisecond), at)
	if got, want := c.sendAt(at, 0), at.Add(300*time.Microsecond+sendMargin); !got.Equal(want) {
		t.Fatalf("after a slow answer sendAt = %v, want %v", got, want)
	}
	// A faster one, 2 s after the first: the offset falls by at most
	// clockSlew for the last second (300 µs → 200 µs), not to 50 µs at once.
	at = base.Add(2 * time.Second)
	c.observe(at.Add(50*time.Microsecond), at)
	if got := c.offsetNow(); got != 200*time.Microsecond {
		t.Fatalf("offset after a faster answer = %v, want 200µs (slewed)", got)
	}
	// A quiet minute saves no allowance up: one fast answer then falls
	// 100 µs, the next second's reaches the least.
	at = base.Add(62 * time.Second)
	c.observe(at.Add(50*time.Microsecond), at)
	if got := c.offsetNow(); got != 100*time.Microsecond {
		t.Fatalf("offset after a quiet minute = %v, want 100µs (one second's fall)", got)
	}
	at = base.Add(63 * time.Second)
	c.observe(at.Add(50*time.Microsecond), at)
	if got := c.offsetNow(); got != 50*time.Microsecond {
		t.Fatalf("offset a second on = %v, want 50µs", got)
	}
	// Every answer of an epoch slower (the clocks drifting apart): the
	// offset rises to an epoch's least at the epoch's end.
	for i := range 25 {
		at = base.Add(64*time.Second + time.Duration(i)*time.Second)
		c.observe(at.Add(900*time.Microsecond+time.Duration(i)*time.Microsecond), at)
	}
	risen := c.offsetNow()
	if risen < 900*time.Microsecond || risen > 925*time.Microsecond {
		t.Fatalf("offset after 25 s of slower answers = %v, want an epoch's least, 900-925µs", risen)
	}
	// One slow answer after a quiet spell, or a few in an epoch, raise
	// nothing.
	for _, sec := range []int{120, 131, 135} {
		at = base.Add(time.Duration(sec) * time.Second)
		c.observe(at.Add(5*time.Millisecond), at)
	}
	if got := c.offsetNow(); got != risen {
		t.Fatalf("offset after sparse slow answers = %v, want %v kept", got, risen)
	}
}

// TestSendClockCalibrates: calibrate sets the offset from TIME round trips
// on the real Redis before any answer: a loopback latency, well under the
// margin, returned with its samples and shown in the gauge, which then
// follows the offset as answers lower it.
func TestSendClockCalibrates(t *testing.T) {
	c := sendClock{gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})}
	start := time.Now()
	offset, n := c.calibrate(context.Background(), testenv.Redis(t))
	if took := time.Since(start); took < calibrationSpan*3/4 {
		t.Errorf("calibrate took %v, want its samples spread over about %v", took, calibrationSpan)
	}
	if c.sendAt(time.Now(), 0).IsZero() || n != calibrationSamples {
		t.Fatalf("calibrate set no offset, or took %d samples (want %d)", n, calibrationSamples)
	}
	if got := c.offsetNow(); got != offset || got < -time.Second || got > 2*time.Millisecond {
		t.Errorf("calibrated offset %v (returned %v), want it returned and a loopback latency (under 2ms; the clocks are the same host's)", got, offset)
	}
	if g := testutil.ToFloat64(c.gauge); g != offset.Seconds() {
		t.Errorf("gauge %v after calibration, want the offset %v", g, offset.Seconds())
	}
	now := time.Now()
	c.observe(now.Add(2*time.Second), now.Add(2*time.Second).Add(-offset+50*time.Microsecond)) // 50 µs quicker: falls (slewed: 100 µs a second)
	got := c.offsetNow()
	if got >= offset {
		t.Fatalf("offset %v after a quicker answer, want below %v", got, offset)
	}
	if g := testutil.ToFloat64(c.gauge); g != got.Seconds() {
		t.Errorf("gauge %v after a fall, want the offset %v", g, got.Seconds())
	}
}

// TestWaitSend: a dispatch waits for its send time, at most sendMargin, and
// reports a time already passed as late.
func TestWaitSend(t *testing.T) {
	if waitSend(context.Background(), time.Time{}) {
		t.Error("no send time: late, want not")
	}
	if !waitSend(context.Background(), time.Now().Add(-time.Millisecond)) {
		t.Error("a send time passed: not late, want late")
	}
	start := time.Now()
	if waitSend(context.Background(), start.Add(2*time.Millisecond)) {
		t.Error("a send time ahead: late, want not")
	}
	if time.Since(start) < 2*time.Millisecond {
		t.Errorf("waited %v, want ≥ 2ms", time.Since(start))
	}
	start = time.Now()
	waitSend(context.Background(), start.Add(time.Hour))
	if w := time.Since(start); w < sendMargin || w > sendMargin+time.Second {
		t.Errorf("a send time an hour ahead: waited %v, want sendMargin (%v)", w, sendMargin)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	waitSend(ctx, start.Add(time.Hour))
	if w := time.Since(start); w >= sendMargin {
		t.Errorf("ctx ended: waited %v, want less than sendMargin", w)
	}
}

// offsetNow is the offset, for the tests.
func (c *sendClock) offsetNow() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}
