package limits

import "time"

// Request is one admission question: may Tenant's job of Cost units pass
// every one of Policies and the backlog gate?
type Request struct {
	// Tenant is the tenant id (keys.ValidTenant); every key is tagged with it.
	Tenant string
	// Policies are checked together, all or nothing; their Names must differ.
	// None means only the backlog gate applies.
	Policies []Policy
	// Cost is the request's units (a batch of N jobs costs N); 0 means 1.
	// The backlog gate counts it, and so does every policy without its own
	// entry in Costs.
	Cost int64
	// Costs, when not empty, holds one cost per policy (same order as
	// Policies; 0 means Cost): a batch mixing job types charges each type's
	// policy only its own jobs' units.
	Costs []int64
	// MaxBacklog is the backlog gate: refuse when the tenant's backlog
	// (keys.Backlog) + Cost > MaxBacklog. 0 means no gate.
	MaxBacklog int64
	// DryRun decides and reports the state without writing anything: a
	// caller uses it for the limit-state headers of an answer that admits
	// nothing (a validation error, a replay). Results then report the
	// remaining units as they are.
	DryRun bool
	// Now is the decision's instant; the zero Time means Redis TIME, which
	// production uses so that ingest instances with skewed clocks agree. Tests
	// pass explicit instants.
	Now time.Time
}

// Decision is the answer to a Request.
type Decision struct {
	// Allowed says whether the request was admitted; only then was any state
	// written.
	Allowed bool
	// Results holds one Result per Request.Policies, in order.
	Results []Result
	// Violated names the refusing party when not Allowed: "backlog" when the
	// backlog gate refused (it is checked first), else the Name of the first
	// refusing policy. Empty when Allowed.
	Violated string
	// Backlog is the tenant's backlog as read by the script (0 when
	// MaxBacklog is 0, in which case it is not read).
	Backlog int64
}

// ViolatedBacklog is Decision.Violated when the backlog gate refused.
const ViolatedBacklog = "backlog"
