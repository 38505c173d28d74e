package demosink

import (
	"context"
	"log/slog"
	"time"
)

// Log writes one line every interval until ctx is done: the totals and each
// tenant's recent rate (jobs/s) in the group "rate", e.g.
//
//	msg=rates received=120 duplicates=0 refused=6 rate.acme=4.9 rate.globex=2
func (s *Sink) Log(ctx context.Context, log *slog.Logger, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			log.LogAttrs(ctx, slog.LevelInfo, "rates", s.Stats().attrs()...)
		}
	}
}

// attrs are the log attributes of st.
func (st Stats) attrs() []slog.Attr {
	names := st.TenantNames()
	rates := make([]any, 0, len(names))
	for _, name := range names {
		rates = append(rates, slog.Float64(name, st.Tenants[name].Rate))
	}
	return []slog.Attr{
		slog.Int64("received", st.Received),
		slog.Int64("duplicates", st.Duplicates),
		slog.Int64("refused", st.Refused),
		slog.Group("rate", rates...),
	}
}
