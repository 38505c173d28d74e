//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/client"
)

// Submission etiquette: package client with its retries of 429, 503 and
// connection errors under the same id, given enough tries (and a short
// enough backoff cap) to outlast every fault of the suite, so that what a
// retry after an unclear answer does is tested too.
const (
	maxTries     = 20
	backoffBase  = 200 * time.Millisecond
	backoffCap   = 2 * time.Second
	httpTimeout  = 15 * time.Second
	maxInFlight  = 256
	prefillBatch = 500
)

// answer is one HTTP answer to a submission; status 0 is a connection
// error or a timeout.
type answer struct {
	sent, at time.Time
	status   int
}

// entry is one job of the ledger: its client id (also its job id), tenant,
// every answer in order, and the call's outcome (final: the last status, 0
// when the call ended on an error without one).
type entry struct {
	id, tenant string
	answers    []answer
	final      int
	jobID      string // of the 202
}

// ledger records every submission and every answer.
type ledger struct {
	mu      sync.Mutex
	entries []*entry
}

func (l *ledger) add(id, tenant string) *entry {
	e := &entry{id: id, tenant: tenant}
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
	return e
}

func (l *ledger) record(es []*entry, a answer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range es {
		e.answers = append(e.answers, a)
	}
}

func (l *ledger) finish(e *entry, final int, jobID string) {
	l.mu.Lock()
	e.final, e.jobID = final, jobID
	l.mu.Unlock()
}

// snapshot returns a copy of every entry.
func (l *ledger) snapshot() []entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]entry, len(l.entries))
	for i, e := range l.entries {
		out[i] = *e
		out[i].answers = append([]answer(nil), e.answers...)
	}
	return out
}

// accepted returns the ids whose call ended in a 202.
func (l *ledger) accepted() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for _, e := range l.entries {
		if e.final == http.StatusAccepted {
			ids = append(ids, e.id)
		}
	}
	return ids
}

type entriesKey struct{}

// recorder is the clients' transport: it records every answer of a request
// into the ledger entries its context carries.
type recorder struct {
	next http.RoundTripper
	l    *ledger
}

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	es, _ := req.Context().Value(entriesKey{}).([]*entry)
	sent := time.Now()
	resp, err := r.next.RoundTrip(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	r.l.record(es, answer{sent: sent, at: time.Now(), status: status})
	return resp, err
}

// loader submits jobs for the row's tenants through package client.
type loader struct {
	l       *ledger
	clients map[string]*client.Client
	tenants []string
	prefix  string
	seq     atomic.Int64
	sem     chan struct{}
	wg      sync.WaitGroup
	stopped chan struct{}
	ticks   sync.WaitGroup
}

func newLoader(ingestURL, prefix string, tenants []string, key func(string) string) *loader {
	ld := &loader{l: &ledger{}, clients: map[string]*client.Client{}, tenants: tenants, prefix: prefix,
		sem: make(chan struct{}, maxInFlight), stopped: make(chan struct{})}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxInFlight
	hc := &http.Client{Transport: recorder{next: tr, l: ld.l}, Timeout: httpTimeout}
	for _, tn := range tenants {
		ld.clients[tn] = client.New(ingestURL, key(tn), client.WithHTTPClient(hc),
			client.WithMaxTries(maxTries), client.WithBackoff(backoffBase, backoffCap))
	}
	return ld
}

func (ld *loader) nextID(tenant string) string {
	return fmt.Sprintf("%s-%s-%07d", ld.prefix, tenant, ld.seq.Add(1))
}

// run submits perSecond jobs a second, spread over the tenants in turn,
// each submission in its own goroutine (at most maxInFlight at once), until
// halt.
func (ld *loader) run(perSecond float64) {
	ld.ticks.Add(1)
	go func() {
		defer ld.ticks.Done()
		start, n := time.Now(), 0
		for {
			due := start.Add(time.Duration(float64(n) / perSecond * float64(time.Second)))
			select {
			case <-ld.stopped:
				return
			case <-time.After(time.Until(due)):
			}
			tenant := ld.tenants[n%len(ld.tenants)]
			n++
			ld.sem <- struct{}{}
			ld.wg.Add(1)
			go func() {
				defer func() { <-ld.sem; ld.wg.Done() }()
				ld.submit(tenant)
			}()
		}
	}()
}

// submit submits one job of tenant and records its outcome.
func (ld *loader) submit(tenant string) {
	e := ld.l.add(ld.nextID(tenant), tenant)
	ctx := context.WithValue(context.Background(), entriesKey{}, []*entry{e})
	acc, err := ld.clients[tenant].Submit(ctx, client.Job{ID: e.id, Type: "chaos", Payload: []byte(`{"n":1}`)})
	ld.l.finish(e, outcome(err), acc.JobID)
}

// prefill submits n jobs of tenant in batches of prefillBatch, one batch at
// a time, and returns how many were 202'd.
func (ld *loader) prefill(tenant string, n int) int {
	ok := 0
	for n > 0 {
		size := min(n, prefillBatch)
		n -= size
		es := make([]*entry, size)
		jobs := make([]client.Job, size)
		for i := range es {
			es[i] = ld.l.add(ld.nextID(tenant), tenant)
			jobs[i] = client.Job{ID: es[i].id, Type: "chaos", Payload: []byte(`{"n":1}`)}
		}
		ctx := context.WithValue(context.Background(), entriesKey{}, es)
		accs, err := ld.clients[tenant].SubmitBatch(ctx, jobs)
		for i, e := range es {
			jobID := ""
			if err == nil && i < len(accs) {
				jobID = accs[i].JobID
				ok++
			}
			ld.l.finish(e, outcome(err), jobID)
		}
	}
	return ok
}

// halt stops run and waits until every submission has ended.
func (ld *loader) halt() {
	select {
	case <-ld.stopped:
	default:
		close(ld.stopped)
	}
	ld.ticks.Wait()
	ld.wg.Wait()
}

// outcome is a call's final status: 202, the status of an *client.Error, or
// 0 for an error without one.
func outcome(err error) int {
	var apiErr *client.Error
	switch {
	case err == nil:
		return http.StatusAccepted
	case errors.As(err, &apiErr):
		return apiErr.Status
	default:
		return 0
	}
}
