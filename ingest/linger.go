package ingest

import (
	"io"
	"net/http"
	"strings"
	"time"
)

// An answer written while the request's body has not been read to its end
// (body.go lists the cases) is sent at once with Connection: close, and the
// rest of the body is then read and dropped before the connection closes.
//
// Without this, net/http either reads the left-over body before it sends
// the answer (up to 256 KiB, for as long as ReadTimeout allows: a refused
// client that sends slowly waited 10 s for a 405), or, once the handler has
// made it close, closes a connection with unread bytes in it: the kernel
// answers the client's next segment with a TCP reset, its write fails, and
// many clients (Go's among them) report a broken connection instead of the
// answer that was sent (RFC 9112 §9.6 asks a server to linger for this
// reason).
//
// The lingering is bounded: it goes on while the body keeps arriving, with
// no gap longer than lingerGap, for at most lingerBytes and body_timeout in
// all. A declared Content-Length above lingerBytes is not read at all
// (net/http sends its FIN and waits half a second before it closes), nor is
// a body whose read already failed (408, a broken chunked framing) or one a
// client still waits to be asked for (Expect: 100-continue, nothing read).
const (
	lingerBytes = 1 << 20
	lingerGap   = 500 * time.Millisecond
)

// trackedBody is a request body that records how far it was read.
type trackedBody struct {
	rc     io.ReadCloser
	read   bool // some bytes were read
	eof    bool // read to its end
	failed bool // a read failed: a deadline, a broken framing, a closed body
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.read = b.read || n > 0
	switch {
	case err == io.EOF:
		b.eof = true
	case err != nil:
		b.failed = true
	}
	return n, err
}

func (b *trackedBody) Close() error { return b.rc.Close() }

// answerWriter decides, when the answer's header is written, whether the
// body is left unread: then the answer closes the connection, and linger
// says whether to read the rest of the body after it.
type answerWriter struct {
	http.ResponseWriter
	r      *http.Request
	body   *trackedBody
	wrote  bool
	linger bool
}

func (w *answerWriter) WriteHeader(code int) {
	if code >= 200 && !w.wrote {
		w.wrote = true
		w.decide()
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *answerWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.wrote = true
		w.decide()
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *answerWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *answerWriter) decide() {
	b := w.body
	if b.eof {
		return
	}
	w.Header().Set("Connection", "close")
	waiting := !b.read && strings.EqualFold(w.r.Header.Get("Expect"), "100-continue")
	w.linger = !b.failed && !waiting && w.r.ContentLength <= lingerBytes
}

// answerFirst runs h with r's body tracked and, when h answered with the
// body unread, sends the answer and reads the rest of the body within the
// lingering bounds (at most bodyTimeout in all).
func answerFirst(w http.ResponseWriter, r *http.Request, bodyTimeout time.Duration, h http.HandlerFunc) {
	if r.Body == nil || r.Body == http.NoBody {
		h(w, r)
		return
	}
	b := &trackedBody{rc: r.Body}
	r = r.WithContext(r.Context()) // a shallow copy: net/http keeps its own body
	r.Body = b
	aw := &answerWriter{ResponseWriter: w, r: r, body: b}
	h(aw, r)
	if !aw.wrote || !aw.linger {
		return
	}
	rc := http.NewResponseController(w)
	// The answer carries a Content-Length (writeProblem, writeRawJSON), so
	// it is complete on the wire before the body is read.
	_ = rc.Flush()
	end := time.Now().Add(bodyTimeout)
	buf := make([]byte, 32<<10)
	for n := 0; n < lingerBytes && !b.eof && !b.failed; {
		d := time.Now().Add(lingerGap)
		if d.After(end) {
			d = end
		}
		_ = rc.SetReadDeadline(d)
		k, _ := b.Read(buf)
		n += k
	}
	if !b.eof {
		// Over the bounds: net/http reads no more of it either.
		_ = rc.SetReadDeadline(time.Now())
	}
}
