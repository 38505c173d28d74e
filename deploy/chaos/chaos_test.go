//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

func TestMain(m *testing.M) {
	dir, err := buildBinaries()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// short reports whether CHAOS_SHORT asks for the short form.
func short() bool { return os.Getenv("CHAOS_SHORT") != "" && os.Getenv("CHAOS_SHORT") != "0" }

// TestChaos runs every row on each of its backends (the short rows with
// their short load under CHAOS_SHORT=1), logs the table and writes it to
// results/ (a full run, or CHAOS_RESULTS=1). A row fails when it lost a
// 202'd job, answered a false 202, or missed its outflow bound.
func TestChaos(t *testing.T) {
	var (
		mu      sync.Mutex
		results []result
	)
	t.Cleanup(func() {
		table := markdown(results)
		t.Logf("chaos results:\n%s", table)
		if len(results) > 0 && (!short() || os.Getenv("CHAOS_RESULTS") == "1") {
			if path, err := writeResults(table); err != nil {
				t.Errorf("write results: %v", err)
			} else {
				t.Logf("written to %s", path)
			}
		}
	})
	for _, backend := range []string{"redis", "kafka"} {
		for _, r := range rows {
			if !has(r.backends, backend) || (short() && !r.short) {
				continue
			}
			name := backend + "/" + strings.ReplaceAll(r.name, " ", "_")
			t.Run(name, func(t *testing.T) {
				res := runRow(t, backend, r)
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
				if res.verdict != "ok" {
					t.Errorf("%s on %s: %s", r.name, backend, res.verdict)
				}
			})
		}
	}
}

func has(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// runRow starts the row's stack, prefills, starts the drainers and the
// load, injects the fault, stops the load, waits for the drain and
// measures.
func runRow(t *testing.T, backend string, r row) result {
	ld := r.load
	if short() {
		ld = r.shortLoad
	}
	st := startStack(t, backend, r.topo)
	lo := newLoader(st.ingestURL, testenv.Name(t, "c"), st.tenants, tenantKey)
	for _, tn := range st.tenants {
		if ld.prefill > 0 {
			if n := lo.prefill(tn, ld.prefill); n != ld.prefill {
				t.Logf("prefill of %s: %d of %d jobs 202'd", tn, n, ld.prefill)
			}
		}
	}
	st.startDrainers()
	loadStart := time.Now()
	if ld.perSecond > 0 {
		lo.run(ld.perSecond)
	}
	time.Sleep(ld.before)
	sp := r.fault(st)
	t.Logf("fault from %s for %v", sp.at.Format("15:04:05.000"), sp.end.Sub(sp.at).Round(time.Millisecond))
	time.Sleep(ld.after)
	lo.halt()
	loadEnd := time.Now()
	accepted := lo.l.accepted()
	st.awaitDrain(accepted, r.topo.rate*float64(r.topo.tenants))
	m := measure{row: r, backend: backend, st: st, entries: lo.l.snapshot(), deliveries: st.sink.deliveries(),
		fault: sp, loadStart: loadStart, loadEnd: loadEnd, perSecond: ld.perSecond}
	return m.result()
}

// awaitDrain waits until the sink has every accepted job, at most the time
// the rest takes at rate plus 60 s, then 3 s more for late duplicates.
func (st *stack) awaitDrain(accepted []string, rate float64) {
	rest := len(accepted) - st.sink.count(accepted)
	end := time.Now().Add(time.Duration(float64(rest)/rate*float64(time.Second)) + 60*time.Second)
	for st.sink.count(accepted) < len(accepted) && time.Now().Before(end) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
}
