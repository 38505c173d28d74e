package ingest_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"
)

// loadConn is the ingest benchmark's client: one keep-alive HTTP/1.1
// connection that sends the same POST /v1/jobs again and again, its bytes
// built once, and reads each answer's status line, headers and
// Content-Length body from a buffered reader. Like wrk, it allocates
// nothing per request and costs a few microseconds of CPU, so a benchmark's
// allocations per request are the server's and its CPU goes to the server
// and Redis (net/http's client cost about 90 allocations and 30 % of the
// process's CPU per request: docs/perf.md step 30).
type loadConn struct {
	c   net.Conn
	r   *bufio.Reader
	req []byte
}

// dialLoad connects to base (http://host:port) and builds the request that
// posts body with key as the bearer token.
func dialLoad(base, key string, body []byte) (*loadConn, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		return nil, err
	}
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST /v1/jobs HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Host, key, len(body))
	req.Write(body)
	return &loadConn{c: c, r: bufio.NewReaderSize(c, 16<<10), req: req.Bytes()}, nil
}

var errNoLength = errors.New("loadgen: answer without Content-Length (chunked or closing), which this client does not read")

// post sends the request once and returns the answer's status code after
// its body is read (discarded).
func (l *loadConn) post() (int, error) {
	if _, err := l.c.Write(l.req); err != nil {
		return 0, err
	}
	line, err := l.r.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("loadgen: bad status line %q", line)
	}
	status, ok := digits(line[9:12])
	if !ok {
		return 0, fmt.Errorf("loadgen: bad status line %q", line)
	}
	length := -1
	for {
		h, err := l.r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(h) <= 2 {
			break
		}
		if name, v, ok := bytes.Cut(h, []byte(":")); ok && len(name) == len("Content-Length") &&
			bytes.EqualFold(name, []byte("Content-Length")) {
			if length, ok = digits(bytes.TrimSpace(v)); !ok {
				return 0, fmt.Errorf("loadgen: bad Content-Length %q", h)
			}
		}
	}
	if length < 0 {
		return 0, errNoLength
	}
	if _, err := l.r.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}

// timedPost is post that answers an error unless the status is 202, and
// the time the round trip took.
func (l *loadConn) timedPost() (time.Duration, error) {
	start := time.Now()
	status, err := l.post()
	if err != nil {
		return 0, err
	}
	if status != 202 {
		return 0, fmt.Errorf("status %d", status)
	}
	return time.Since(start), nil
}

// digits reads b as a decimal number of 1 to 9 digits, without the
// allocation strconv.Atoi(string(b)) may make.
func digits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
