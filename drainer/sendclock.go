package drainer

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// This file holds how a shaped job's send is put on the bucket's clock.
//
// The shared bucket grants turns by Redis TIME; a drainer used to send a
// job its SendDelay after the take's answer arrived, so each send trailed
// its turn by that answer's latency. The start-up burst's answers are
// slower than the paced ones' a second later (every lane asks at once), so
// a 1-s window of send times that opened at the burst's first send held
// rate × (that difference) more jobs than the bucket granted in a second
// of its own clock: one per millisecond at 1000/s, which put the bound
// rate + capacity at a margin of one job (docs/perf.md step 27).
//
// Now each answer tells the bucket's clock (queue.Turn.At,
// outflow.Result.At), and a drainer sends the job at turn + offset +
// sendMargin on its own clock, where offset is the least (answer − bucket
// clock) it saw: the one-way latency plus the clocks' difference. The
// sends are then the turns shifted by one constant per drainer, as long as
// no answer comes later than sendMargin after the least; one that does
// goes at once (counted in sluice_drainer_late_sends_total). The lane's
// loop still runs on the answer's time (it asks for the next turns as
// before); only the dispatch waits the last stretch, at most sendMargin.

// sendMargin is how long after its turn plus the least answer latency a
// shaped job is sent: the extra latency of every shaped send, and the
// spread of answer latencies the send times absorb.
const sendMargin = 5 * time.Millisecond

// clockSlew bounds how fast the offset may fall: a lower offset moves the
// sends after it earlier, which can put more of them in a window than the
// bucket granted in the same stretch of its clock, by rate × the fall.
// The allowance is counted from the last fall or rise and for at most a
// second, so a quiet stretch saves none up: at most 100 µs in any second,
// 0.1 job at 1000/s, and far above any clock drift.
const clockSlew = 100 * time.Microsecond

// clockEpoch is how often a higher least latency is taken (the clocks
// drifting apart the other way): the offset rises to the least of an
// epoch's answers when that is above it, if the epoch had at least
// clockEpochSamples answers and no gap made it longer than two epochs (one
// slow answer after a quiet spell says nothing). A rise only delays later
// sends.
const (
	clockEpoch        = 10 * time.Second
	clockEpochSamples = 8
)

// sendClock maps the bucket's clock to this drainer's. The zero value has
// no offset yet: sendAt answers zero (send at the answer's time) until the
// first answer or calibration. One offset serves every Redis node the
// drainer's buckets live on: on a Cluster whose nodes' clocks differ by
// more than sendMargin, the sends of the shards behind the least one are
// late (sent at once, counted), as they were before the bucket's clock was
// used. Safe for concurrent use.
type sendClock struct {
	// gauge, when set, follows offset (sluice_drainer_send_offset_seconds).
	gauge prometheus.Gauge

	mu       sync.Mutex
	offset   time.Duration // local − bucket: the least answer latency, slewed
	moved    time.Time     // when offset last fell or rose (local); zero: no offset yet
	epoch    time.Time     // the current epoch's start (local)
	epochMin time.Duration // the least latency in the current epoch
	epochN   int           // answers in the current epoch
}

// observe takes one answer: got is when it arrived here, at the bucket's
// clock in it (zero: the backend did not tell, nothing learnt).
func (c *sendClock) observe(got, at time.Time) {
	if at.IsZero() {
		return
	}
	s := got.Sub(at)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moved.IsZero() {
		c.reset(got, s)
		return
	}
	if c.epochN == 0 || s < c.epochMin {
		c.epochMin = s
	}
	c.epochN++
	if s < c.offset {
		allowance := min(got.Sub(c.moved), time.Second)
		floor := c.offset - time.Duration(float64(allowance)*float64(clockSlew)/float64(time.Second))
		c.offset, c.moved = max(s, floor), got
		c.show()
	}
	if since := got.Sub(c.epoch); since >= clockEpoch {
		if since < 2*clockEpoch && c.epochN >= clockEpochSamples && c.epochMin > c.offset {
			c.offset, c.moved = c.epochMin, got
			c.show()
		}
		c.epoch, c.epochN = got, 0
	}
}

// show sets the gauge to the offset (c.mu held).
func (c *sendClock) show() {
	if c.gauge != nil {
		c.gauge.Set(c.offset.Seconds())
	}
}

// reset sets the offset to s outright: the first answer, or calibration's
// least sample.
func (c *sendClock) reset(got time.Time, s time.Duration) {
	c.offset, c.moved, c.epoch, c.epochMin, c.epochN = s, got, got, s, 1
	c.show()
}

// sendAt is when a job whose turn falls delay after the bucket's clock at
// is sent here: zero when at is zero or no offset is known yet (the caller
// sends at the answer plus delay, as before). The jobs of one answer share
// at: sendAt(at, 0) once, then later(base, delay) for each.
func (c *sendClock) sendAt(at time.Time, delay time.Duration) time.Time {
	if at.IsZero() {
		return time.Time{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moved.IsZero() {
		return time.Time{}
	}
	return at.Add(delay + c.offset + sendMargin)
}

// later is base + d, zero when base is zero (no send time).
func later(base time.Time, d time.Duration) time.Time {
	if base.IsZero() {
		return base
	}
	return base.Add(d)
}

// calibrationSamples is how many TIME round trips calibrate takes, spread
// over calibrationSpan; the first, which may open the connection, is not
// counted. Drainers started together calibrate while the others start, and
// a sample's latency then includes waits for the CPU: with 8 back-to-back
// samples, 8 drainers on 2 cores calibrated offsets of 15–682 µs
// (docs/perf.md step 31), and the offsets' spread across drainers is what
// can put more sends in a 1-s window than the bucket granted. More samples,
// spread out, make a quick one likelier.
const (
	calibrationSamples = 32
	calibrationSpan    = 50 * time.Millisecond
)

// calibrate sets the offset to the least of calibrationSamples TIME round
// trips before the first take (not slewed: nothing was sent yet), so the
// start-up burst's sends already sit on the bucket's clock (its own answers
// are the slowest). It returns the offset it leaves and how many samples it took
// (0: none, the offset is left to the answers). Every drainer of a tenant
// sends at its own offset, so two drainers whose offsets differ by d can
// put rate × d more sends in a 1-s window than the bucket granted in one
// second of its clock: the offset is logged and kept in a gauge so a
// spread can be seen.
func (c *sendClock) calibrate(ctx context.Context, rdb redis.UniversalClient) (time.Duration, int) {
	if err := rdb.Time(ctx).Err(); err != nil {
		return 0, 0
	}
	var least time.Duration
	n := 0
	for i := range calibrationSamples {
		if i > 0 {
			select {
			case <-time.After(calibrationSpan / calibrationSamples):
			case <-ctx.Done():
			}
		}
		at, err := rdb.Time(ctx).Result()
		if err != nil {
			break
		}
		if s := time.Since(at); n == 0 || s < least {
			least = s
		}
		n++
	}
	if n == 0 {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.moved.IsZero() || least < c.offset {
		c.reset(time.Now(), least)
	}
	return c.offset, n
}

// waitSend holds a dispatch until its send time t (zero: none), at most
// sendMargin, or until ctx ends: the loop that launched it waited until the
// answer plus the turn's delay already, so what is left is the margin less
// the answer's extra latency (and the waits for room and the start's
// record). It reports whether the send is late (t had passed).
func waitSend(ctx context.Context, t time.Time) (late bool) {
	if t.IsZero() {
		return false
	}
	d := time.Until(t)
	if d <= 0 {
		return d < 0
	}
	timer := time.NewTimer(min(d, sendMargin))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}
