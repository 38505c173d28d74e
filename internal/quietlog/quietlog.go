// Package quietlog logs a repeating warning at most once per key per
// window: the first line is written, the others of that window are only
// counted, and the key's next line says how many were left out
// ("suppressed", with "suppressed_window"). It serves the failures that
// repeat for as long as their cause lasts (a target that refuses every
// delivery, Redis down under a loop that runs every 200 ms): the log says
// why without flooding, while the metrics count every one.
package quietlog

import (
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Prune is the number of keys remembered above which a new key first drops
// those whose window has passed with nothing left out, and those quiet for
// Forget windows with a count never reported (the metrics have it), at
// most once a window: so the map stays bounded by the keys failing within
// Forget windows, whatever keys come and go, and a flood of new keys does
// not rescan it for each one.
const Prune = 1024

// Forget is how many windows a key with a count left out is kept without
// a new line.
const Forget = 6

// Log is a logger of repeating warnings. Safe for concurrent use. A count
// left out is reported with the key's next line; a key that stops
// repeating never reports it (the metrics have it).
type Log struct {
	log    *slog.Logger
	clock  clock.Clock
	every  time.Duration
	mu     sync.Mutex
	by     map[string]*seen
	pruned time.Time // the last prune
}

type seen struct {
	last       time.Time // when the key's last line was written
	suppressed int       // lines since then left out
}

// New returns a Log writing to log (nil: slog.Default()) at most one line
// per key per every, on clock c (nil: the system clock).
func New(log *slog.Logger, c clock.Clock, every time.Duration) *Log {
	if log == nil {
		log = slog.Default()
	}
	return &Log{log: log, clock: clock.Or(c), every: every, by: map[string]*seen{}}
}

// Warn writes msg with args at level Warn, followed by "suppressed" and
// "suppressed_window", unless key had a line within the window; then it
// only counts it.
func (l *Log) Warn(key, msg string, args ...any) {
	now := l.clock.Now()
	l.mu.Lock()
	s := l.by[key]
	if s == nil {
		if len(l.by) >= Prune && now.Sub(l.pruned) >= l.every {
			l.prune(now)
		}
		s = &seen{}
		l.by[key] = s
	}
	if !s.last.IsZero() && now.Sub(s.last) < l.every {
		s.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := s.suppressed
	s.last, s.suppressed = now, 0
	l.mu.Unlock()
	l.log.Warn(msg, append(args, "suppressed", suppressed, "suppressed_window", l.every.String())...)
}

// Keys returns how many keys l remembers (for tests of the bound).
func (l *Log) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.by)
}

// prune drops the keys whose window ended before now with nothing left
// out, and those quiet for Forget windows. Called with l.mu held.
func (l *Log) prune(now time.Time) {
	l.pruned = now
	for k, s := range l.by {
		if age := now.Sub(s.last); (s.suppressed == 0 && age >= l.every) || age >= Forget*l.every {
			delete(l.by, k)
		}
	}
}
