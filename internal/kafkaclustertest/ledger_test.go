package kafkaclustertest

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// answer is ingest's answer to one submission, with when it was sent and
// answered (status 0: no answer, the HTTP call failed).
type answer struct {
	id         string
	status     int
	retryAfter string
	sent, done time.Time
}

// load submits jobs over HTTP from a few clients, each job with an id of its
// own, and keeps every answer.
type load struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	wg      sync.WaitGroup
}

// Load shape: loadClients clients, each sending its next job loadGap after
// the last answer (≈150 jobs/s while the cluster is healthy).
const (
	loadClients = 4
	loadGap     = 20 * time.Millisecond
)

// startLoad starts the clients; ids are prefix-<client>-<n>.
func (st *stack) startLoad(prefix string) *load {
	l := &load{stop: make(chan struct{})}
	client := &http.Client{Timeout: 15 * time.Second}
	for c := range loadClients {
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				case <-time.After(loadGap):
				}
				l.add(st.submit(client, fmt.Sprintf("%s-%d-%d", prefix, c, n)))
			}
		})
	}
	return l
}

// submit posts one job with id and returns the answer.
func (st *stack) submit(client *http.Client, id string) answer {
	a := answer{id: id, sent: time.Now()}
	req, err := http.NewRequest("POST", st.url+"/v1/jobs", strings.NewReader(`{"type":"t","id":"`+id+`","payload":{}}`))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	}
	a.done = time.Now()
	return a
}

func (l *load) add(a answer) {
	l.mu.Lock()
	l.answers = append(l.answers, a)
	l.mu.Unlock()
}

// finish stops the clients and returns every answer, in the order answered.
func (l *load) finish() []answer {
	close(l.stop)
	l.wg.Wait()
	slices.SortFunc(l.answers, func(a, b answer) int { return a.done.Compare(b.done) })
	return l.answers
}

// firstAccepted returns the first 202 to a job sent at or after from.
func firstAccepted(answers []answer, from time.Time) (answer, bool) {
	for _, a := range answers {
		if a.status == http.StatusAccepted && !a.sent.Before(from) {
			return a, true
		}
	}
	return answer{}, false
}

// tally is one scenario's figures.
type tally struct {
	accepted, delivered, lost, duplicates, unavailable, unavailableDelivered int
	// copied is the jobs with more than one record on the topic: a produce
	// retried after its acknowledgement was lost with the leader.
	copied int
}

// check waits until the sink has every 202'd job, then fails the test for a
// lost job, a 503 without Retry-After or any other answer, and returns the
// figures. A 503'd job may be delivered (its outcome was unknown) and a
// job may be delivered twice (a crash redelivery); both are counted.
func (st *stack) check(t *testing.T, answers []answer) tally {
	t.Helper()
	var accepted []string
	var tl tally
	for _, a := range answers {
		switch {
		case a.status == http.StatusAccepted:
			accepted = append(accepted, a.id)
		case a.status == http.StatusServiceUnavailable && a.retryAfter != "":
			tl.unavailable++
		default:
			t.Errorf("job %s sent %s: status %d, Retry-After %q; want 202, or 503 with Retry-After",
				a.id, a.sent.Format("15:04:05.000"), a.status, a.retryAfter)
		}
	}
	tl.accepted = len(accepted)
	missing := func() []string {
		got := st.sink.deliveries()
		var out []string
		for _, id := range accepted {
			if got[id] == 0 {
				out = append(out, id)
			}
		}
		return out
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	got, records := st.sink.deliveries(), st.records(t)
	for _, a := range answers {
		n := got[a.id]
		if n > 0 && a.status == http.StatusAccepted {
			tl.delivered++
		}
		if n > 0 && a.status == http.StatusServiceUnavailable {
			tl.unavailableDelivered++
		}
		if n > 1 {
			tl.duplicates++
		}
		if records[a.id] > 1 {
			tl.copied++
		}
	}
	if lost := missing(); len(lost) > 0 {
		tl.lost = len(lost)
		t.Errorf("%d of %d 202'd jobs were not delivered within 60 s, e.g. %v", len(lost), len(accepted), lost[:min(5, len(lost))])
	}
	return tl
}

// logTally logs one scenario's row.
func logTally(t *testing.T, name string, tl tally, recovered time.Duration) {
	t.Helper()
	t.Logf("%s: 202'd %d, delivered %d, lost %d, duplicates %d (jobs with 2+ records on the topic %d), 503s %d (of which delivered %d), 202s back after %v",
		name, tl.accepted, tl.delivered, tl.lost, tl.duplicates, tl.copied, tl.unavailable, tl.unavailableDelivered, recovered.Round(10*time.Millisecond))
}
