//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/client"
)

// result is one row of the table.
type result struct {
	row, backend string
	accepted     int // submissions whose call ended in a 202
	delivered    int // of them, received by the sink at least once
	lost         int // 202'd, never received
	dups         int // jobs received more than once
	false202     int // lost and unknown to GET /v1/jobs/{id}
	// recover202 and recoverOut are the longest pauses of 202s and of a
	// tenant's deliveries from the fault on (measure.recovery); -1: none.
	recover202, recoverOut time.Duration
	outflow, rate, load    float64 // jobs/s
	bound                  float64
	notes                  []string
	verdict                string
}

// measure is what a row's run left, to be counted.
type measure struct {
	row                row
	backend            string
	st                 *stack
	entries            []entry
	deliveries         map[string][]delivery
	fault              span
	loadStart, loadEnd time.Time
	perSecond          float64
}

func (m *measure) result() result {
	res := result{row: m.row.name, backend: m.backend, bound: m.row.bound, load: m.perSecond,
		rate: m.row.topo.rate * float64(m.row.topo.tenants)}
	var lost []entry
	finals := map[int]int{}
	unacceptedDelivered := 0
	for _, e := range m.entries {
		got := len(m.deliveries[e.id]) > 0
		if e.final != http.StatusAccepted {
			finals[e.final]++
			if got {
				unacceptedDelivered++
			}
			continue
		}
		res.accepted++
		if got {
			res.delivered++
		} else {
			lost = append(lost, e)
		}
	}
	res.lost = len(lost)
	res.false202 = m.falseAccepts(&res, lost)
	if len(finals) > 0 {
		res.notes = append(res.notes, fmt.Sprintf("not 202'd in the end: %s; %d of them delivered all the same (an unclear answer whose job was queued)",
			statusCounts(finals), unacceptedDelivered))
	}
	m.duplicates(&res)
	if m.backend == "kafka" {
		res.notes = append(res.notes, fmt.Sprintf("partition assignments logged by the drainers (rebalances, the first included): %d", m.assignments()))
	}
	res.recover202, res.recoverOut = m.recovery()
	res.outflow = m.outflow()
	res.verdict = verdict(res)
	return res
}

// falseAccepts asks GET /v1/jobs/{id} about each lost job (at most 200):
// one the server does not know (404) was never queued, a false 202. The
// states of the others go into the notes.
func (m *measure) falseAccepts(res *result, lost []entry) int {
	states := map[string]int{}
	n := 0
	for i, e := range lost {
		if i == 200 {
			states["not asked"] += len(lost) - i
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		js, err := client.New(m.st.ingestURL, tenantKey(e.tenant), client.WithMaxTries(3)).Job(ctx, e.id)
		cancel()
		var apiErr *client.Error
		switch {
		case errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound:
			n++
			states["404"]++
		case err != nil:
			states["error: "+err.Error()]++
		default:
			states[js.State]++
		}
	}
	if len(lost) > 0 {
		res.notes = append(res.notes, fmt.Sprintf("lost jobs by GET /v1/jobs/{id}: %s (e.g. %s)",
			countList(states), lost[0].id))
	}
	return n
}

// duplicates counts the jobs delivered more than once and explains them by
// their Sluice-Attempt sequence, when their first copy came (before,
// during or after the fault's span) and whether a fault was injected
// between the copies.
func (m *measure) duplicates(res *result) {
	patterns, phases := map[string]int{}, map[string]int{}
	across, retried := 0, 0
	var gaps []time.Duration
	unclear := m.retriedIDs()
	for id, ds := range m.deliveries {
		if len(ds) < 2 {
			continue
		}
		res.dups++
		seq := make([]string, len(ds))
		for i, d := range ds {
			seq[i] = fmt.Sprint(d.attempt)
		}
		patterns["attempts "+strings.Join(seq, ",")]++
		phases[m.phase(ds[0].at)]++
		gaps = append(gaps, ds[1].at.Sub(ds[0].at))
		if unclear[id] {
			retried++
		}
		if m.straddles(ds[0].at, ds[len(ds)-1].at) {
			across++
		}
	}
	if res.dups > 0 {
		sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
		res.notes = append(res.notes, fmt.Sprintf("duplicates: %s; first copy %s; %d of %d with a fault injected between the copies; %d of %d submitted again after a 503 or no answer; second copy %v to %v (median %v) after the first",
			countList(patterns), countList(phases), across, res.dups, retried, res.dups,
			gaps[0].Round(time.Millisecond), gaps[len(gaps)-1].Round(time.Millisecond), gaps[len(gaps)/2].Round(time.Millisecond)))
	}
}

// retriedIDs are the ids whose submission got a 503 or no answer before
// its last one: an unclear outcome the client retried with the same id.
func (m *measure) retriedIDs() map[string]bool {
	out := map[string]bool{}
	for _, e := range m.entries {
		for _, a := range e.answers[:max(0, len(e.answers)-1)] {
			if a.status == 0 || a.status == http.StatusServiceUnavailable {
				out[e.id] = true
			}
		}
	}
	return out
}

// phase names when t was against the fault's span.
func (m *measure) phase(t time.Time) string {
	switch {
	case t.Before(m.fault.at):
		return "before the fault"
	case t.After(m.fault.end):
		return "after it"
	default:
		return "during it"
	}
}

// straddles reports whether a fault was injected between first and last.
func (m *measure) straddles(first, last time.Time) bool {
	for _, ev := range m.fault.events {
		if first.Before(ev) && !last.Before(ev) {
			return true
		}
	}
	return false
}

// assignments counts the drainers' "partitions assigned" log lines: one
// per drainer and generation it got partitions in.
func (m *measure) assignments() int {
	n := 0
	for _, d := range m.st.drainers {
		b, _ := os.ReadFile(d.log)
		n += strings.Count(string(b), `"msg":"kafka consumer: partitions assigned"`)
	}
	return n
}

// recovery returns how long 202s and deliveries paused from the fault on:
// the longest gap between consecutive 202 answers, and between consecutive
// deliveries of one tenant (the longest over the tenants), that ends after
// the fault took effect and begins before the load stopped; -1 when there
// was none. The load keeps every tenant busy, so a gap is an outage.
func (m *measure) recovery() (time.Duration, time.Duration) {
	var accepts []time.Time
	for _, e := range m.entries {
		for _, a := range e.answers {
			if a.status == http.StatusAccepted {
				accepts = append(accepts, a.at)
			}
		}
	}
	sort.Slice(accepts, func(i, j int) bool { return accepts[i].Before(accepts[j]) })
	r202 := m.longestGap(accepts)
	rOut := time.Duration(-1)
	for _, tn := range m.st.tenants {
		rOut = max(rOut, m.longestGap(times(m.deliveries, tn)))
	}
	return r202, rOut
}

// longestGap is the longest gap between consecutive times of ts (sorted)
// that ends at or after the fault and begins before the load's end.
func (m *measure) longestGap(ts []time.Time) time.Duration {
	gap := time.Duration(-1)
	end := m.loadEnd
	if m.row.bound > 0 {
		end = m.fault.end
	}
	for i := 1; i < len(ts); i++ {
		if !ts[i].Before(m.fault.at) && ts[i-1].Before(end) {
			gap = max(gap, ts[i].Sub(ts[i-1]))
		}
	}
	return gap
}

// outflow is deliveries a second over the fault's span for an outflow row,
// else over the load.
func (m *measure) outflow() float64 {
	from, to := m.loadStart, m.loadEnd
	if m.row.bound > 0 {
		from, to = m.fault.at, m.fault.end
	}
	n := 0
	for _, ds := range m.deliveries {
		for _, d := range ds {
			if !d.at.Before(from) && d.at.Before(to) {
				n++
			}
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// verdict is "ok", or what the row got wrong.
func verdict(r result) string {
	var bad []string
	if r.lost > 0 {
		bad = append(bad, fmt.Sprintf("%d lost", r.lost))
	}
	if r.false202 > 0 {
		bad = append(bad, fmt.Sprintf("%d false 202", r.false202))
	}
	if r.bound > 0 && math.Abs(r.outflow-r.rate) > r.bound*r.rate {
		bad = append(bad, fmt.Sprintf("outflow %.1f/s outside %.0f/s ± %.0f %%", r.outflow, r.rate, r.bound*100))
	}
	if len(bad) == 0 {
		return "ok"
	}
	return "FAIL: " + strings.Join(bad, ", ")
}

func statusCounts(m map[int]int) string {
	s := map[string]int{}
	for st, n := range m {
		name := fmt.Sprint(st)
		if st == 0 {
			name = "connection error"
		}
		s[name] = n
	}
	return countList(s)
}

// countList spells a count per name as "name ×n, ..." sorted by name.
func countList(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
