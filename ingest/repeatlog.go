package ingest

import "time"

// repeatLogEvery bounds the per-request warnings that repeat while Redis or
// the queue is down (an outage of a few seconds at a few hundred requests a
// second wrote thousands of lines): one line per message and tenant per
// repeatLogEvery, the rest counted in the next line ("suppressed"; package
// quietlog). The metrics count every failure.
const repeatLogEvery = 10 * time.Second

// warnRepeat logs msg for tenant at Warn, at most once per repeatLogEvery
// for that message and tenant.
func (s *Server) warnRepeat(tenant, msg string, args ...any) {
	s.quiet.Warn(msg+"\x00"+tenant, msg, append([]any{"tenant", tenant}, args...)...)
}
