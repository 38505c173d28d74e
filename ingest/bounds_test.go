package ingest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// boundsConfig is testConfig with the client bounds in ingest (a YAML flow
// mapping's members, e.g. "body_timeout: 300ms").
func boundsConfig(t testing.TB, bounds string, tenants ...string) *config.Config {
	t.Helper()
	y := "ingest: {max_body_bytes: 2048, max_batch_jobs: 5, retry_after: 2s, shutdown_timeout: 5s, " + bounds + "}\ntenants:\n" + strings.Join(tenants, "")
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, y)
	}
	return cfg
}

// serveIngest runs Server.Serve on a loopback listener (wrapped by wrap,
// when given) until the test ends and returns its address.
func serveIngest(t *testing.T, cfg *config.Config, rdb redis.UniversalClient, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	srv, _ := newServer(t, cfg, deps{rdb: rdb})
	return serve(t, srv, wrap)
}

// serve runs srv.Serve on a loopback listener (wrapped by wrap, when given)
// until the test ends, checks that it then returns nil, and returns its
// address.
func serve(t *testing.T, srv *ingest.Server, wrap func(net.Listener) net.Listener) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if wrap != nil {
		ln = wrap(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve = %v", err)
		}
	})
	return addr
}

// rawAnswer is one answer read off a raw connection.
type rawAnswer struct {
	status int
	header http.Header
	body   string
	// closed: the server closed the connection after the answer.
	closed bool
}

// exchange writes req on a new connection to addr (sending what it can:
// the server may stop reading) and reads one answer within wait.
func exchange(t *testing.T, addr, req string, wait time.Duration) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() {
		_ = c.SetWriteDeadline(time.Now().Add(wait))
		_, _ = io.WriteString(c, req)
	}()
	if err := c.SetReadDeadline(time.Now().Add(wait)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %v: %v", wait, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("answer body: %v", err)
	}
	a := rawAnswer{status: resp.StatusCode, header: resp.Header, body: string(b)}
	// A server that closes does so right after the answer; one that keeps
	// the connection sends nothing more.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err = br.ReadByte()
	a.closed = err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
	return a
}

// checkProblem checks a refusal: status, problem+json, the field named, no
// socket address in the body.
func checkProblem(t *testing.T, what string, a rawAnswer, status int, field string) {
	t.Helper()
	if a.status != status {
		t.Errorf("%s: status %d, want %d: %s", what, a.status, status, a.body)
		return
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", what, ct)
	}
	if !strings.Contains(a.body, `"status":`+fmt.Sprint(status)) {
		t.Errorf("%s: body %s is not the problem of a %d", what, a.body, status)
	}
	if field != "" && !strings.Contains(a.body, `"field":"`+field+`"`) {
		t.Errorf("%s: body %s does not name field %q", what, a.body, field)
	} else if field == "" && strings.Contains(a.body, `"field"`) {
		t.Errorf("%s: body %s names a field, want none", what, a.body)
	}
	if strings.Contains(a.body, "127.0.0.1:") || strings.Contains(a.body, "tcp") {
		t.Errorf("%s: body %s echoes a socket address", what, a.body)
	}
}

// nothingWritten fails when Redis holds any key of tenant.
func nothingWritten(t *testing.T, rdb redis.UniversalClient, tenant string) {
	t.Helper()
	ks, err := rdb.Keys(context.Background(), keys.Prefix+"{"+tenant+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) > 0 {
		t.Errorf("tenant %s has keys %v in Redis, want none", tenant, ks)
	}
}

// rawPost is a raw POST of body to path as tenant, with extra header lines.
func rawPost(path, tenant, body string, extra ...string) string {
	return rawRequest("POST", path, apiKey(tenant), "application/json", body, extra...)
}

// rawRequest is a raw HTTP/1.1 request with a bearer token and a body; a
// Content-Length is added unless extra has one or a Transfer-Encoding.
func rawRequest(method, path, token, contentType, body string, extra ...string) string {
	h := method + " " + path + " HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer " + token + "\r\nContent-Type: " + contentType + "\r\n"
	hasLength := false
	for _, e := range extra {
		h += e + "\r\n"
		lower := strings.ToLower(e)
		hasLength = hasLength || strings.HasPrefix(lower, "content-length:") || strings.HasPrefix(lower, "transfer-encoding:")
	}
	if !hasLength {
		h += fmt.Sprintf("Content-Length: %d\r\n", len(body))
	}
	return h + "\r\n" + body
}

// TestSlowReadersAreCut (issue 7 req 5): 100 clients that send requests and
// never read the answers hold a connection and a goroutine each only until
// ingest.write_timeout, then the server closes them. Each asks for about 1.5 MB of answers (404s
// that repeat a 50 KB path), more than socket buffers hold.
func TestSlowReadersAreCut(t *testing.T) {
	rdb := testenv.Redis(t)
	cfg := boundsConfig(t, "write_timeout: 300ms, idle_timeout: 1h")
	var open, accepted atomic.Int64
	addr := serveIngest(t, cfg, rdb, func(ln net.Listener) net.Listener { return countingListener{ln, &open, &accepted} })
	// Small socket buffers on both ends (no autotuning to megabytes), so
	// that what is not read blocks the server's writes within kilobytes.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	base := runtime.NumGoroutine()

	const clients, pipelined = 100, 30
	req := strings.Repeat("GET /"+strings.Repeat("x", 50_000)+" HTTP/1.1\r\nHost: a\r\n\r\n", pipelined)
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
		// The server stops reading requests once its answers are stuck,
		// so the write may not finish; it gives up after 5 s.
		go func() {
			_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c, req)
		}()
	}
	testenv.WaitFor(t, 10*time.Second, "every client's connection accepted", func() bool { return accepted.Load() == clients })
	// Each connection's answers get stuck in full buffers; the server cuts
	// it write_timeout after the stuck answer's handler began.
	testenv.WaitFor(t, 10*time.Second, "every connection closed by the server", func() bool { return open.Load() == 0 })
	testenv.WaitFor(t, 10*time.Second, fmt.Sprintf("goroutines back to about %d (a slack of 20)", base), func() bool {
		return runtime.NumGoroutine() <= base+20
	})
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := io.Copy(io.Discard, c)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("client %d: connection still open after the write timeout (%d bytes read)", i, n)
		}
	}
	// The server still serves others.
	if a := exchange(t, addr, "GET /healthz HTTP/1.1\r\nHost: sluice\r\n\r\n", 2*time.Second); a.status != http.StatusOK {
		t.Errorf("/healthz after the cut: %d", a.status)
	}
}

// countingListener counts the connections it accepted and those open, and
// gives each a small send buffer.
type countingListener struct {
	net.Listener
	open, accepted *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	l.open.Add(1)
	l.accepted.Add(1)
	return &countedConn{Conn: c, open: l.open}, nil
}

type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// TestHeaderLimit (issue 7 req 5): a 1 MiB header value and 10,000 headers
// are refused with 431 (net/http answers it before any handler, as
// text/plain), and a request under ingest.max_header_bytes still passes.
func TestHeaderLimit(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "hdr")
	addr := serveIngest(t, boundsConfig(t, "max_header_bytes: 8192", tenantYAML(tenant, "")), rdb, nil)
	many := strings.Repeat("X-Filler-Header: value\r\n", 10000)
	for name, extra := range map[string]string{
		"1 MiB header value": "X-Big: " + strings.Repeat("a", 1<<20),
		"10,000 headers":     strings.TrimSuffix(many, "\r\n"),
	} {
		a := exchange(t, addr, rawPost("/v1/jobs", tenant, `{"type":"ok"}`, extra), 5*time.Second)
		if a.status != http.StatusRequestHeaderFieldsTooLarge || !a.closed {
			t.Errorf("%s: status %d (closed %v), want 431 and the connection closed: %s", name, a.status, a.closed, a.body)
		}
		if strings.Contains(a.body, "127.0.0.1:") {
			t.Errorf("%s: body %q echoes a socket address", name, a.body)
		}
	}
	nothingWritten(t, rdb, tenant)
	ok := exchange(t, addr, rawPost("/v1/jobs", tenant, `{"type":"ok"}`, "X-Some: "+strings.Repeat("a", 4000)), 5*time.Second)
	if ok.status != http.StatusAccepted {
		t.Errorf("4 KB header under the 8 KiB limit: status %d, want 202: %s", ok.status, ok.body)
	}
}

// TestSlowBody (issue 7 req 5): a body that has not arrived body_timeout
// after the headers is a 408 problem that names no socket address, the
// connection is closed, and nothing is queued; before this, the answer was a
// 400 echoing "read tcp 127.0.0.1:…: i/o timeout" after 30 s.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "slow")
	addr := serveIngest(t, boundsConfig(t, "body_timeout: 300ms", tenantYAML(tenant, "")), rdb, nil)
	for _, path := range []string{"/v1/jobs", "/v1/jobs:batch"} {
		// 10 of 100 bytes, and then nothing.
		a := exchange(t, addr, rawPost(path, tenant, `{"type":"o`, "Content-Length: 100"), 5*time.Second)
		checkProblem(t, path+" slow body", a, http.StatusRequestTimeout, "")
		if !a.closed {
			t.Errorf("%s: connection left open after a 408", path)
		}
	}
	nothingWritten(t, rdb, tenant)
}

// TestContentLengthOverLimit (issue 7 req 5): a Content-Length above
// max_body_bytes is a 413 at once, with no byte of the body sent (the body
// timeout is long, so an answer that waited for the body would not come in
// time).
func TestContentLengthOverLimit(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "cl")
	addr := serveIngest(t, boundsConfig(t, "body_timeout: 1m", tenantYAML(tenant, "")), rdb, nil)
	for _, path := range []string{"/v1/jobs", "/v1/jobs:batch"} {
		for _, n := range []int64{2049, 1 << 40} {
			a := exchange(t, addr, rawPost(path, tenant, "", fmt.Sprintf("Content-Length: %d", n)), 2*time.Second)
			checkProblem(t, fmt.Sprintf("%s Content-Length %d", path, n), a, http.StatusRequestEntityTooLarge, "")
			if !strings.Contains(a.body, `"limit":2048`) || !a.closed {
				t.Errorf("%s: %s (closed %v), want the limit named and the connection closed", path, a.body, a.closed)
			}
		}
	}
	nothingWritten(t, rdb, tenant)
}

// TestTransferEncoding (issue 7 req 6): net/http takes a request with both
// Content-Length and Transfer-Encoding: chunked, drops the Content-Length
// and reads chunks (RFC 9112 §6.3), so the handler cannot tell it from a
// plain chunked one; ingest refuses every Transfer-Encoding with 411 and
// closes the connection, so neither reading of the framing goes further.
// Other transfer codings net/http refuses itself (501).
func TestTransferEncoding(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "te")
	addr := serveIngest(t, boundsConfig(t, "body_timeout: 1m", tenantYAML(tenant, "")), rdb, nil)
	chunked := "d\r\n{\"type\":\"ok\"}\r\n0\r\n\r\n"
	for name, req := range map[string]string{
		"Content-Length and chunked": rawPost("/v1/jobs", tenant, chunked, "Content-Length: 13", "Transfer-Encoding: chunked"),
		"chunked and Content-Length": rawPost("/v1/jobs:batch", tenant, chunked, "Transfer-Encoding: chunked", "Content-Length: 4"),
		"chunked only":               rawPost("/v1/jobs", tenant, chunked, "Transfer-Encoding: chunked"),
		// A smuggled second request after the chunked body must not run.
		"smuggled request": rawPost("/v1/jobs", tenant, "0\r\n\r\n"+rawPost("/v1/jobs", tenant, `{"type":"ok"}`), "Content-Length: 200", "Transfer-Encoding: chunked"),
	} {
		a := exchange(t, addr, req, 5*time.Second)
		checkProblem(t, name, a, http.StatusLengthRequired, "Transfer-Encoding")
		if !a.closed {
			t.Errorf("%s: connection left open after a 411", name)
		}
	}
	a := exchange(t, addr, rawPost("/v1/jobs", tenant, "x", "Transfer-Encoding: gzip, chunked"), 5*time.Second)
	if a.status != http.StatusNotImplemented || strings.Contains(a.body, "127.0.0.1:") {
		t.Errorf("Transfer-Encoding gzip: status %d %q, want net/http's 501", a.status, a.body)
	}
	nothingWritten(t, rdb, tenant)
}

// TestContentEncoding (issue 7 req 6): a body in any content coding but
// identity is a 415 naming Content-Encoding (sluice decodes none), with
// Accept-Encoding: identity; identity itself is fine.
func TestContentEncoding(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "ce")
	addr := serveIngest(t, boundsConfig(t, "body_timeout: 5s", tenantYAML(tenant, "")), rdb, nil)
	for _, ce := range []string{"gzip", "br", "identity, gzip", "x-unknown"} {
		for _, path := range []string{"/v1/jobs", "/v1/jobs:batch"} {
			a := exchange(t, addr, rawPost(path, tenant, `{"type":"ok"}`, "Content-Encoding: "+ce), 5*time.Second)
			checkProblem(t, path+" Content-Encoding "+ce, a, http.StatusUnsupportedMediaType, "Content-Encoding")
			if got := a.header.Get("Accept-Encoding"); got != "identity" {
				t.Errorf("%s: Accept-Encoding %q, want identity", ce, got)
			}
		}
	}
	nothingWritten(t, rdb, tenant)
	if a := exchange(t, addr, rawPost("/v1/jobs", tenant, `{"type":"ok"}`, "Content-Encoding: identity"), 5*time.Second); a.status != http.StatusAccepted {
		t.Errorf("Content-Encoding identity: status %d, want 202: %s", a.status, a.body)
	}
}
