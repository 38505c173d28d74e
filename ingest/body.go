package ingest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Request bodies (POST /v1/jobs, /v1/jobs:batch, admin PUT and PATCH) are
// read under these bounds, each answered as problem+json:
//
//   - Transfer-Encoding (chunked) is refused with 411: a body must declare
//     its Content-Length. net/http drops the Content-Length of a request
//     that carries both (RFC 9112 §6.3) before a handler sees it, so this
//     is also how a request with both, a request-smuggling attempt, is
//     refused;
//   - a Content-Encoding other than identity is 415 (sluice decodes none);
//   - a Content-Length over ingest.max_body_bytes is 413 at once, the body
//     unread;
//   - a body still arriving ingest.body_timeout after the headers is 408;
//   - any other read error is a 400 that says only that the body could not
//     be read: the error (which names socket addresses) is logged, never
//     echoed.
//
// An answer given while the request's body is not read to its end (every
// refusal before the body is read: 401, 404, 405, 411, 413, 415; and one
// that stopped reading it: 413 past max_body_bytes) is sent at once and
// closes the connection (Connection: close), so nothing after it is read as
// a request. Then, before the close, the rest of the body is read and
// dropped (linger.go), so a client still sending it is not cut off by a TCP
// reset and reliably gets its answer. A body that could not be read (408, a
// broken framing) is not read further.

// checkBodyHeaders refuses, before any byte of the body is read, a body
// whose headers already say it cannot be taken.
func checkBodyHeaders(w http.ResponseWriter, r *http.Request, limit int64) *problem {
	if len(r.TransferEncoding) > 0 {
		return newProblem(http.StatusLengthRequired, "Transfer-Encoding",
			fmt.Sprintf("Transfer-Encoding %s is not accepted; send the body with a Content-Length and no Transfer-Encoding", strings.Join(r.TransferEncoding, ", ")))
	}
	for _, v := range r.Header.Values("Content-Encoding") {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				w.Header().Set("Accept-Encoding", "identity")
				return newProblem(http.StatusUnsupportedMediaType, "Content-Encoding",
					fmt.Sprintf("Content-Encoding %q is not supported; send the body unencoded (identity)", c))
			}
		}
	}
	if r.ContentLength > limit {
		p := newProblem(http.StatusRequestEntityTooLarge, "",
			fmt.Sprintf("the body exceeds the limit of %d bytes (Content-Length %d)", limit, r.ContentLength))
		p.Limit = limit
		return p
	}
	return nil
}

// readBody reads r's whole body, at most limit bytes. The read deadline is
// armBody's.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *problem) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var maxErr *http.MaxBytesError
	switch {
	case err == nil:
		return body, nil
	case errors.As(err, &maxErr):
		p := newProblem(http.StatusRequestEntityTooLarge, "", fmt.Sprintf("the body exceeds the limit of %d bytes", limit))
		p.Limit = limit
		return nil, p
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		p := newProblem(http.StatusRequestTimeout, "", "the body did not arrive in time")
		p.err = err
		return nil, p
	}
	w.Header().Set("Connection", "close")
	p := newProblem(http.StatusBadRequest, "", "the body could not be read (incomplete or malformed framing)")
	p.err = err
	return nil, p
}

// armBody sets the deadlines of a request that has a body to read: the body
// must have arrived within body_timeout, and the answer must be written
// within write_timeout (plus extra) after that. Errors mean the writer has no
// connection (a test recorder); they are ignored.
func armBody(w http.ResponseWriter, snap *snapshot, extra time.Duration) {
	rc := http.NewResponseController(w)
	now := time.Now()
	_ = rc.SetReadDeadline(now.Add(snap.bodyTimeout))
	_ = rc.SetWriteDeadline(now.Add(snap.bodyTimeout + snap.writeTimeout + extra))
}

// armWrite gives the answer write_timeout (plus extra) from now: called at
// the start of every request, and again once a body has been read.
func armWrite(w http.ResponseWriter, snap *snapshot, extra time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(snap.writeTimeout + extra))
}

// logBodyError logs why a body could not be read, when a problem says it was
// the connection (the client only hears that it was not read).
func (s *Server) logBodyError(r *http.Request, tenant string, p *problem) {
	if p.err == nil {
		return
	}
	s.log.Info("ingest: request body not read", "path", r.URL.Path, "tenant", tenant, "status", p.Status, "remote", r.RemoteAddr, "err", p.err)
}
