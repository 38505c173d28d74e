package sluicectl

import (
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// TestPauseResumeStatsTop pauses and resumes a tenant through the real
// admin API and reads what shows it: stats (paused, and the admission
// rates of 3 jobs admitted and 2 refused), a PAUSED row in top with its
// ADM/s and REF/s, and the audit's outflow.paused change. The server is
// served (Serve), so it adds its admission counts to Redis once a second.
func TestPauseResumeStatsTop(t *testing.T) {
	a := testenv.Name(t, "pa")
	st := startAdminStack(t, tenantYAML(a, "    admission: {algorithm: fixed_window, limit: 3, period: 1m}\n    outflow: {rate: 2}\n"+
		"    target: {url: \"http://127.0.0.1:9/hook\"}\n"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- st.srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-served })
	url := "http://" + ln.Addr().String()
	admin := map[string]string{"SLUICE_ADMIN_TOKEN": adminToken}

	r := run(t, url, "", admin, "pause", a)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "paused tenant "+a+" (version 1): no delivery starts within 1 s") {
		t.Fatalf("pause: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	for i, want := range []int{202, 202, 202, 429, 429} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/jobs", strings.NewReader(`{"type":"email"}`))
		req.Header.Set("Authorization", "Bearer "+keyOf(a))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("job %d while paused: %d, want %d", i, resp.StatusCode, want)
		}
	}
	testenv.WaitFor(t, 5*time.Second, "stats with the admission rates", func() bool {
		r = run(t, url, "", admin, "stats", a)
		return strings.Contains(r.stdout, "admission    admitted 0.3/s, refused 0.2/s (last 10 s)\n")
	})
	for _, want := range []string{
		"paused       yes: no delivery starts; jobs are still admitted (sluicectl resume " + a + ")\n",
		"backlog      3 (drains in 2s once resumed)\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stats: no line %q in:\n%s", want, r.stdout)
		}
	}
	r = run(t, url, "", admin, "top", "--frames", "1")
	row := regexp.MustCompile(`(?m)^` + a + `\s+3\s+0\.3\s+0\.2\s+2\.0\s+2\.0\s+0\.0\s+0\.0/2\s+\[\.{10}\]\s+0\s+0\s+2s\s+PAUSED \(resume: sluicectl resume ` + a + `\)$`)
	if r.code != 0 || !row.MatchString(r.stdout) || !strings.Contains(r.stdout, "· 1 paused") {
		t.Errorf("top: exit %d, want a row matching %s and 1 paused in:\n%s%s", r.code, row, r.stdout, r.stderr)
	}

	r = run(t, url, "", admin, "resume", a)
	if r.code != 0 || r.stdout != "resumed tenant "+a+" (version 2): delivery goes on at its outflow rate\n" {
		t.Fatalf("resume: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r = run(t, url, "", admin, "stats", a); strings.Contains(r.stdout, "paused") {
		t.Errorf("stats after resume still says paused:\n%s", r.stdout)
	}
	r = run(t, url, "", admin, "tenants", "audit", a)
	if !strings.Contains(r.stdout, "outflow.paused: true → false") || !strings.Contains(r.stdout, "outflow.paused: false → true") {
		t.Errorf("audit: want both outflow.paused changes in:\n%s%s", r.stdout, r.stderr)
	}

	if r := run(t, url, "", map[string]string{"SLUICE_KEY": keyOf(a)}, "pause", a); r.code != 2 || !strings.Contains(r.stderr, "needs an admin token") {
		t.Errorf("pause with a tenant key: exit %d, %q; want 2 and a hint", r.code, r.stderr)
	}
	if r := run(t, url, "", admin, "resume", "nosuch"); r.code != 1 || !strings.Contains(r.stderr, "404 Not Found") {
		t.Errorf("resume of an unknown tenant: exit %d, %q; want 1 and a 404", r.code, r.stderr)
	}
	if r := run(t, url, "", admin, "pause"); r.code != 2 {
		t.Errorf("pause without a tenant: exit %d, want 2", r.code)
	}
}
