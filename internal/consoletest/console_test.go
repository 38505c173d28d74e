package consoletest

import (
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/testenv"
)

// features says which routes of the operate issue this server has: the
// pause flag in stats, the DLQ routes, the job lists. A step whose route is
// absent is not run (and, with CI=true, fails the test).
type features struct{ pause, dlq, jobs bool }

func probe(t *testing.T, st *stack) features {
	var stats map[string]any
	st.call(t, "GET", "/v1/tenants/"+st.busy+"/stats", adminToken, nil, &stats)
	_, pause := stats["paused"]
	dlq := st.call(t, "GET", "/admin/v1/tenants/"+st.spare+"/dlq", adminToken, nil, nil) == 200
	jobs := st.call(t, "GET", "/v1/jobs?state=queued&tenant="+st.spare, adminToken, nil, nil) == 200
	return features{pause: pause, dlq: dlq, jobs: jobs}
}

// notRun reports a step that cannot run on this server.
func notRun(t *testing.T, step, why string) {
	if os.Getenv("CI") == "true" {
		t.Errorf("step %q cannot run: %s", step, why)
		return
	}
	t.Logf("NOT RUN: step %q: %s", step, why)
}

// TestConsole drives the console in chromium against a live stack, on each
// queue backend: login, live overview and charts, a rate change (and a
// refused one showing the problem's detail), pause and resume seen at the
// sink, a dead job redriven to the sink, a job list and a job lookup; no
// console errors. The Redis run saves the screenshots when
// SLUICE_CONSOLE_SCREENSHOTS=1.
func TestConsole(t *testing.T) {
	chromiumPath(t)
	for _, backend := range []string{"redis", "kafka"} {
		t.Run(backend, func(t *testing.T) { testConsole(t, backend) })
	}
}

func testConsole(t *testing.T, backend string) {
	st := startStack(t, backend)
	f := probe(t, st)
	b := newBrowser(t)
	b.shots = backend == "redis" && os.Getenv("SLUICE_CONSOLE_SCREENSHOTS") == "1"
	if !f.dlq {
		b.allow("/dlq?")
	}
	if !f.jobs {
		b.allow("/v1/jobs?state=")
	}
	st.load(t, st.busy, 8) // 8 jobs/s against an outflow of 5/s: the backlog grows

	stepLogin(b, st)
	stepOverview(b, st)
	stepTenantPage(b, st)
	stepPause(t, b, st, f)
	stepDeadLetter(t, b, st, f)
	stepJobLookup(b, st)
}

func row(tenant, field string) string {
	return `tr[data-tenant="` + tenant + `"] td[data-field="` + field + `"]`
}

func stepLogin(b *browser, st *stack) {
	b.do("open the console", chromedp.Navigate(st.ingest+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.do("type the token, Enter", chromedp.SendKeys(chromedp.CSS("#token"), adminToken+"\r"))
	b.do("overview shown", chromedp.WaitVisible(chromedp.CSS(`tr[data-tenant="`+st.busy+`"]`)))
	if u := eval[string](b, "location.href"); strings.Contains(u, adminToken) {
		b.t.Errorf("the token is in the URL: %s", u)
	}
	if v := eval[string](b, `document.getElementById("token").value`); v != "" {
		b.t.Errorf("the token field still holds %q after login", v)
	}
}

// stepOverview: the numbers of the busy tenant move between refreshes and
// its chart gets samples.
func stepOverview(b *browser, st *stack) {
	first := b.text(row(st.busy, "backlog")) + " " + b.text(row(st.busy, "measured_rate"))
	b.waitText(row(st.busy, "backlog"), "the backlog to move", 20*time.Second, func(s string) bool {
		return s+" "+b.text(row(st.busy, "measured_rate")) != first
	})
	b.waitText(row(st.busy, "measured_rate"), "a measured outflow", 20*time.Second, func(s string) bool {
		return s != "" && s != "0.00" && s != "—"
	})
	if s := b.text(row(st.busy, "configured_rate")); s != "5.00" {
		b.t.Errorf("configured rate of %s shows %q, want 5.00", st.busy, s)
	}
	chart := `figure[data-tenant="` + st.busy + `"] path.line.backlog`
	b.do("chart drawn", chromedp.WaitVisible(chromedp.CSS(chart)))
	// Wait for a few more samples, so the chart shows a line.
	b.waitText(`figure[data-tenant="`+st.busy+`"] .key.backlog`, "the chart to follow the backlog", 30*time.Second, func(s string) bool {
		return strings.Count(eval[string](b, `document.querySelector('`+chart+`').getAttribute("d")`), "L") >= 3
	})
	if d, err := time.ParseDuration(os.Getenv("SLUICE_CONSOLE_WARMUP")); err == nil && d > 0 {
		b.t.Logf("SLUICE_CONSOLE_WARMUP: letting the stack run %v before the screenshots", d)
		time.Sleep(d)
	}
	b.screenshot("overview.png", "")
}

// stepTenantPage: open the busy tenant by keyboard, change its rate with
// Enter, see the audit entry; a refused value shows the problem's detail.
func stepTenantPage(b *browser, st *stack) {
	b.press("open the tenant", `tr[data-tenant="`+st.busy+`"] th a`)
	b.do("tenant page", chromedp.WaitVisible(chromedp.CSS(`#tenant-stats dd[data-field="backlog"]`)))
	b.waitText("#f-rate", "the form filled", 10*time.Second, func(string) bool {
		return eval[string](b, `document.getElementById("f-rate").value`) == "5"
	})
	b.do("rate 6, Enter", chromedp.SetValue(chromedp.CSS("#f-rate"), "6"), chromedp.Focus(chromedp.CSS("#f-rate")),
		chromedp.KeyEvent("\r"))
	b.waitText("#outflow-msg", "the rate saved", 10*time.Second, func(s string) bool { return strings.HasPrefix(s, "Saved") })
	b.waitText("#audit-rows", "the audit entry", 10*time.Second, func(s string) bool { return strings.Contains(s, "outflow.rate: 5 → 6") })
	b.waitText(`#tenant-stats dd[data-field="configured_rate"]`, "the new rate in the stats", 10*time.Second, func(s string) bool {
		return s == "6.00/s"
	})
	b.waitText("#tenant-chart", "the tenant chart", 15*time.Second, func(string) bool {
		return eval[bool](b, `!!document.querySelector("#tenant-chart path.line.backlog")`)
	})
	b.screenshot("tenant.png", "")
	b.allowPath("/admin/v1/tenants/" + st.busy)
	b.do("rate 0, Enter", chromedp.SetValue(chromedp.CSS("#f-rate"), "0"), chromedp.Focus(chromedp.CSS("#f-rate")),
		chromedp.KeyEvent("\r"))
	msg := b.waitText("#outflow-msg", "the refusal", 10*time.Second, func(s string) bool { return strings.HasPrefix(s, "Not saved: ") })
	if !strings.Contains(msg, "outflow.rate: must be > 0") {
		b.t.Errorf("refusal message %q does not give the problem's detail", msg)
	}
}

// stepPause: pause the busy tenant; the sink gets nothing new (in-flight
// deliveries finish within the first second); resume and deliveries come
// back.
func stepPause(t *testing.T, b *browser, st *stack, f features) {
	if !f.pause {
		notRun(t, "pause and resume", `stats have no "paused" field on this server`)
		return
	}
	b.press("pause", "#pause-btn")
	b.waitText("#pause-msg", "paused", 10*time.Second, func(s string) bool { return strings.HasPrefix(s, "Paused") })
	b.waitText("#tenant-state", "the paused badge", 10*time.Second, func(s string) bool { return s == "Paused" })
	time.Sleep(1500 * time.Millisecond)
	before := st.sink.received(st.busy)
	time.Sleep(3 * time.Second)
	if after := st.sink.received(st.busy); after != before {
		t.Errorf("paused tenant: the sink got %d jobs in 3 s, want 0", after-before)
	}
	b.press("resume", "#resume-btn")
	b.waitText("#pause-msg", "resumed", 10*time.Second, func(s string) bool { return strings.HasPrefix(s, "Resumed") })
	b.waitText("#tenant-state", "the running badge", 10*time.Second, func(s string) bool { return s == "Running" })
	deadline := time.Now().Add(10 * time.Second)
	for st.sink.received(st.busy) == before {
		if time.Now().After(deadline) {
			t.Fatal("resumed tenant: no delivery reached the sink in 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stepDeadLetter: a job the sink refuses dies; the spare tenant's page shows
// it in the DLQ; redriven, it arrives at the sink.
func stepDeadLetter(t *testing.T, b *browser, st *stack, f features) {
	const id = "doomed-1"
	if code := st.submit(t, st.spare, id); code != 202 {
		t.Fatalf("submit %s = %d, want 202", id, code)
	}
	waitState(t, st, id, "dead")
	b.do("overview", chromedp.Navigate(st.ingest+"/ui/#/"), chromedp.WaitVisible(chromedp.CSS(`tr[data-tenant="`+st.spare+`"]`)))
	b.waitText(row(st.spare, "dlq"), "the DLQ count", 10*time.Second, func(s string) bool { return s == "1" })
	b.press("open the spare tenant", `tr[data-tenant="`+st.spare+`"] th a`)
	if !f.dlq {
		b.waitText("#dlq-msg", "the DLQ line", 10*time.Second, func(s string) bool { return strings.Contains(s, "not available") })
		b.screenshot("dlq.png", `section[aria-labelledby="dlq-title"]`)
		notRun(t, "redrive a dead job", "GET /admin/v1/tenants/{id}/dlq answers 404 on this server")
		return
	}
	deadRow := `#dlq-rows tr[data-job="` + id + `"]`
	b.do("the dead job listed", chromedp.WaitVisible(chromedp.CSS(deadRow)))
	b.screenshot("dlq.png", `section[aria-labelledby="dlq-title"]`)
	st.sink.rejecting.Store(false)
	b.press("redrive", deadRow+" button")
	b.waitText("#dlq-msg", "redriven", 10*time.Second, func(s string) bool { return strings.HasPrefix(s, "Redriven 1") })
	testenv.WaitFor(t, 15*time.Second, "the redriven job at the sink", func() bool { return st.sink.got(id) })
	if !f.jobs {
		notRun(t, "job list", "GET /v1/jobs?state= is not served here")
		return
	}
	// The list is read once per press, and the job is done only once the
	// drainer's finish call has run, after the sink answered.
	waitState(t, st, id, "done")
	b.do("state done", chromedp.SetValue(chromedp.CSS("#jobs-state"), "done"))
	b.press("list done jobs", "#jobs-form button")
	b.do("the job in the list", chromedp.WaitVisible(chromedp.CSS(`#jobs-rows tr[data-job="`+id+`"]`)))
}

// stepJobLookup: look a job up from the header's form, then an unknown one.
func stepJobLookup(b *browser, st *stack) {
	b.do("job id and tenant", chromedp.SetValue(chromedp.CSS("#lookup-id"), "doomed-1"),
		chromedp.SetValue(chromedp.CSS("#lookup-tenant"), st.spare))
	b.press("look up", "#lookup-id")
	b.waitText(`#job-fields dd[data-field="job_id"]`, "the job", 10*time.Second, func(s string) bool { return s == "doomed-1" })
	if s := b.text(`#job-fields dd[data-field="tenant"]`); s != st.spare {
		b.t.Errorf("looked-up job's tenant shows %q, want %s", s, st.spare)
	}
	b.allowPath("/v1/jobs/no-such-job")
	b.do("unknown id", chromedp.SetValue(chromedp.CSS("#lookup-id"), "no-such-job"), chromedp.SetValue(chromedp.CSS("#lookup-tenant"), ""))
	b.press("look up", "#lookup-id")
	b.waitText("#job-msg", "not found", 10*time.Second, func(s string) bool { return strings.HasPrefix(s, "Not found: ") })
}

func waitState(t *testing.T, st *stack, id, state string) {
	var got struct{ State string }
	testenv.WaitFor(t, 20*time.Second, "job "+id+" "+state, func() bool {
		st.call(t, "GET", "/v1/jobs/"+url.PathEscape(id)+"?tenant="+st.spare, adminToken, nil, &got)
		return got.State == state
	})
}
