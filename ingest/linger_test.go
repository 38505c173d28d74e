package ingest_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testenv"
)

// onlyReader hides a reader's length, so http.Client sends it chunked.
type onlyReader struct{ io.Reader }

// TestRefusedClientsGetTheirAnswer (issue 7 req 5): a client refused before
// its body is read (411 chunked, 413 Content-Length over the limit, 415,
// 405, 401) gets its answer, never a transport error, whatever the size of
// the body it is still sending (2 B to 300 KiB): never "write: broken
// pipe" or "connection reset" instead of the answer.
func TestRefusedClientsGetTheirAnswer(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "linger")
	addr := serveIngest(t, boundsConfig(t, "body_timeout: 5s", tenantYAML(tenant, "")), rdb, nil)
	base := "http://" + addr
	sizes := []int{2, 100, 2049, 16 << 10, 64 << 10, 200 << 10, 300 << 10}
	type attempt struct {
		method, path, key, ct string
		chunked               bool
		want                  int
	}
	kinds := []attempt{
		{"POST", "/v1/jobs", apiKey(tenant), "application/json", true, http.StatusLengthRequired},
		{"POST", "/v1/jobs:batch", apiKey(tenant), "application/json", true, http.StatusLengthRequired},
		{"POST", "/v1/jobs", apiKey(tenant), "text/plain", false, http.StatusUnsupportedMediaType},
		{"PUT", "/v1/jobs", apiKey(tenant), "application/json", true, http.StatusMethodNotAllowed},
		{"PATCH", "/v1/jobs:batch", apiKey(tenant), "application/json", false, http.StatusMethodNotAllowed},
		{"POST", "/v1/jobs:batch", "wrong-key", "application/json", false, http.StatusUnauthorized},
		{"POST", "/admin/v1/tenants/x", "wrong-key", "application/json", true, http.StatusNotFound},
	}
	client := &http.Client{Timeout: 5 * time.Second}
	const requests = 200
	var (
		mu       sync.Mutex
		failures []string
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				k := kinds[i%len(kinds)]
				n := sizes[(i/len(kinds))%len(sizes)]
				body := bytes.Repeat([]byte("x"), n)
				var rd io.Reader = bytes.NewReader(body)
				if k.chunked {
					rd = onlyReader{rd}
				}
				req, err := http.NewRequest(k.method, base+k.path, rd)
				if err != nil {
					t.Error(err)
					return
				}
				want := k.want
				req.Header.Set("Authorization", "Bearer "+k.key)
				req.Header.Set("Content-Type", k.ct)
				resp, err := client.Do(req)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s %s (%d bytes, chunked %v): %v", k.method, k.path, n, k.chunked, err))
				default:
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != want {
						failures = append(failures, fmt.Sprintf("%s %s (%d bytes, chunked %v): status %d, want %d", k.method, k.path, n, k.chunked, resp.StatusCode, want))
					}
				}
				mu.Unlock()
			}
		}()
	}
	for i := range requests {
		next <- i
	}
	close(next)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d refused requests got no answer or the wrong one; first ones:\n%s", len(failures), requests, strings.Join(failures[:min(10, len(failures))], "\n"))
	}
	nothingWritten(t, rdb, tenant)
}

// TestRefusalsWithBodyUnreadAnswerAtOnce (issue 7 req 5): every refusal
// given before the body is read (404, 405, 401 on each route) is answered
// at once, not after the body (or ReadTimeout), and closes the connection;
// with the body still arriving byte by byte, too.
func TestRefusalsWithBodyUnreadAnswerAtOnce(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	tenant := testenv.Name(t, "early")
	cfg := adminConfig(t, tenantYAML(tenant, ""))
	h := startAdminIngest(t, rdb, cfg, nil)
	addr := strings.TrimPrefix(h.url, "http://")
	cases := []struct {
		name, method, path, token string
		want                      int
	}{
		{"admin wrong method", "POST", "/admin/v1/tenants/x", aliceToken, http.StatusMethodNotAllowed},
		{"admin no route", "PUT", "/admin/v1/nope", aliceToken, http.StatusNotFound},
		{"admin bad token", "PUT", "/admin/v1/tenants/x", "wrong", http.StatusUnauthorized},
		{"jobs wrong method", "PUT", "/v1/jobs", apiKey(tenant), http.StatusMethodNotAllowed},
		{"jobs bad key", "POST", "/v1/jobs:batch", "wrong", http.StatusUnauthorized},
		{"no route", "POST", "/nope", apiKey(tenant), http.StatusNotFound},
		{"healthz with a body", "POST", "/healthz", apiKey(tenant), http.StatusNotFound},
	}
	for _, c := range cases {
		// Content-Length 100, one byte sent, then nothing: the answer comes
		// at once and the connection closes about lingerGap later.
		start := time.Now()
		a := exchange(t, addr, rawRequest(c.method, c.path, c.token, "application/json", "{", "Content-Length: 100"), 2*time.Second)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Errorf("%s: answered after %v, want at once", c.name, took)
		}
		checkProblem(t, c.name, a, c.want, fieldOf(c.want))
		if !a.closed {
			t.Errorf("%s: connection left open after an answer given with the body unread", c.name)
		}
		// The body dribbled, a byte every 50 ms: the answer still comes at
		// once, and the connection closes once the body is complete.
		dribbled(t, c.name, addr, rawRequest(c.method, c.path, c.token, "application/json", "", "Content-Length: 10"), 10, c.want)
	}
}

// fieldOf is the field a refusal of status names in these tests.
func fieldOf(status int) string {
	if status == http.StatusUnauthorized {
		return "Authorization"
	}
	return ""
}

// dribbled sends head, then n body bytes 50 ms apart, and checks that the
// answer (want) arrives before the body is complete and that the server
// closes the connection after it.
func dribbled(t *testing.T, name, addr, head string, n, want int) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, head); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range n {
			time.Sleep(50 * time.Millisecond)
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(time.Duration(n) * 50 * time.Millisecond / 2))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Errorf("%s, body dribbled: no answer before the body was complete: %v", name, err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want || !resp.Close {
		t.Errorf("%s, body dribbled: status %d, Connection: close %v; want %d and close", name, resp.StatusCode, resp.Close, want)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("%s, body dribbled: connection not closed after the body (%v)", name, err)
	}
}
