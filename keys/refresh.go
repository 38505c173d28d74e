package keys

import (
	"sync"
	"time"
)

// Refresh says when a process's write of a tenant's keys also does the
// upkeep that need not ride on every write: refreshing TTLs of keys that
// already exist (every key keeps a TTL: a key is created by a call that sets
// one) and trimming the done index (DoneTrimEvery). Due is true on the
// process's first call for the tenant in each wall-clock second, so a key
// that exists is refreshed at least once a second while the tenant is
// written to, and its TTL never falls more than a second below the one its
// builder states. The scripts take Due as a "1"/"0" ARGV flag. Safe for
// concurrent use; the zero value is ready. It holds one entry per tenant
// seen.
type Refresh struct {
	mu  sync.Mutex
	sec map[string]int64
}

// Due reports whether the call for tenant at now is the process's first
// in now's second, and records it.
func (r *Refresh) Due(tenant string, now time.Time) bool {
	s := now.Unix()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sec == nil {
		r.sec = map[string]int64{}
	}
	if last, ok := r.sec[tenant]; ok && last == s {
		return false
	}
	r.sec[tenant] = s
	return true
}
