package drainer

import (
	"context"
	"sync"
	"time"

	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// outflowCounts are the units of the deliveries this drainer started, per
// tenant and unix second (the drainer's clock), not yet written to
// keys.Outflow. Safe for concurrent use; the zero value is ready.
type outflowCounts struct {
	mu    sync.Mutex
	units map[string]map[int64]int64
}

// add counts units started in second sec for tenant (at least 1).
func (c *outflowCounts) add(tenant string, sec, units int64) { c.adjust(tenant, sec, max(units, 1)) }

// adjust adds delta (any sign) to tenant's units of second sec: a flush's
// counts put back, or a take's count taken back (giveBack).
func (c *outflowCounts) adjust(tenant string, sec, delta int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.units == nil {
		c.units = map[string]map[int64]int64{}
	}
	m := c.units[tenant]
	if m == nil {
		m = map[int64]int64{}
		c.units[tenant] = m
	}
	if m[sec] += delta; m[sec] == 0 {
		delete(m, sec)
	}
}

// take returns the counts and starts afresh.
func (c *outflowCounts) take() map[string]map[int64]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.units
	c.units = nil
	return u
}

// putBack returns counts a flush could not write, except seconds that
// keys.Outflow no longer keeps (older than keys.OutflowTTL before now).
func (c *outflowCounts) putBack(tenant string, units map[int64]int64, now time.Time) {
	oldest := now.Add(-keys.OutflowTTL).Unix()
	for s, n := range units {
		if s > oldest {
			c.adjust(tenant, s, n)
		}
	}
}

// flushTimeout bounds one flush of the outflow counts.
const flushTimeout = time.Second

// flushOutflow writes the outflow counts to keys.Outflow, one
// outflow_add.lua per tenant in one pipeline (jobstate.OutflowAdd), so
// stats' measured outflow and the console history see a second's units at
// most a second after it ends. What fails is kept for the next flush
// (counted as sluice_drainer_errors_total{op="outflow_flush"}); a drainer killed
// meanwhile loses at most a second of counts (display only: the bucket
// does the limiting).
func (d *Drainer) flushOutflow(ctx context.Context) {
	all := d.units.take()
	if len(all) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	tenants := make([]string, 0, len(all))
	calls := make([]lua.Call, 0, len(all))
	for t, u := range all {
		tenants = append(tenants, t)
		calls = append(calls, jobstate.OutflowAdd{Tenant: t, Units: u}.Call())
	}
	for i, cmd := range lua.Exec(ctx, d.cfg.Redis, calls, nil) {
		err := cmd.Err()
		if err == nil {
			_, err = jobstate.OutflowAddReply(cmd.Val())
		}
		if err != nil {
			d.m.errors.WithLabelValues("outflow_flush").Inc()
			d.log.Warn("drainer: outflow counts not written; kept for the next flush", "tenant", tenants[i], "err", err)
			d.units.putBack(tenants[i], all[tenants[i]], d.clock.Now())
		}
	}
}
