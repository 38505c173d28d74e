package keys

import "time"

// History is the tenant's recent backlog and outflow, for the web console's
// charts (no Prometheus needed): a hash with one field per HistoryStep slot,
// field = the slot's first unix second (Redis TIME, a multiple of the step),
// value = "<backlog> <outflow units/s>". The depth sampler of ingest and of
// every drainer writes it (internal/depth); several instances writing the
// same slot overwrite each other with equally fresh figures. The writer
// trims fields older than HistorySpan whenever it opens a new slot, and
// creates no history for a tenant with no state (no backlog counter, no
// recent outflow).
// TTL: HistoryTTL, refreshed on every write.
func History(tenant string) string { return tag(tenant) + ":history" }

// The history's shape (keys.History).
const (
	// HistoryStep is the span of one slot.
	HistoryStep = 5 * time.Second
	// HistorySpan is how far back the history reaches.
	HistorySpan = 15 * time.Minute
	// HistoryTTL bounds a history no instance samples any more.
	HistoryTTL = HistorySpan + time.Minute
)
