package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/strictjson"
	"github.com/sluicehq/sluice/keys"
)

// jobRequest is the JSON body of POST /v1/jobs and one element of a batch.
// Field names are matched exactly and each may appear once (strictjson), so
// a misspelt "dedline", a "Cost" or a second "cost" is a 400 and not a job
// without a deadline, with the default cost or with the last cost given.
// The payload is free-form: its keys are the client's business and are not
// looked at (a repeated key inside it reaches the target as sent). ID is nil
// when no id (or null) was given; "" is an id, and refused. NotBefore,
// Delay and Heartbeat are the scheduled and heartbeat jobs' fields
// (schedule.go).
type jobRequest struct {
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	ID        *string         `json:"id"`
	Deadline  *string         `json:"deadline"`
	Cost      *int64          `json:"cost"`
	NotBefore *string         `json:"not_before"`
	Delay     *string         `json:"delay"`
	Heartbeat *string         `json:"heartbeat"`
}

// batchRequest is the JSON body of POST /v1/jobs:batch. Its elements are
// decoded one by one so that an error names the element ("jobs[3].cost").
type batchRequest struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// job is one validated submission.
type job struct {
	typ      string
	id       string // the client's id, "" when none was given
	payload  json.RawMessage
	deadline *time.Time
	cost     int64
	// due is when a scheduled job falls due (nil: an ordinary job);
	// heartbeat is a heartbeat job's interval (0: none). schedule.go.
	due       *time.Time
	heartbeat time.Duration
	// timing is the request's not_before or delay as sent ("not_before=…",
	// "delay=…", "" when neither): what digestOf compares a retry by, since
	// due depends on when the request arrives.
	timing string
	// field is the job's path in the request: "" for a single job, "jobs[3]"
	// in a batch; errors about the job name fields under it.
	field string
}

// fieldName joins a job's path and a field name: "cost" or "jobs[3].cost".
func fieldName(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case name == "":
		return prefix
	}
	return prefix + "." + name
}

// checkContentType refuses (415 naming Content-Type) a body whose media
// type is not one of types (default application/json), a request with more
// than one Content-Type header (which one the body is would be a guess), and
// a charset other than utf-8: RFC 8259 §8.1 requires JSON exchanged between
// systems to be UTF-8. No charset is utf-8. The job and the admin bodies
// both take this check.
func checkContentType(r *http.Request, types ...string) *problem {
	if len(types) == 0 {
		types = []string{"application/json"}
	}
	want := strings.Join(types, " or ")
	cts := r.Header.Values("Content-Type")
	if len(cts) > 1 {
		return newProblem(http.StatusUnsupportedMediaType, "Content-Type",
			fmt.Sprintf("Content-Type is given %d times (%q); give it once, as %s", len(cts), cts, want))
	}
	ct := r.Header.Get("Content-Type")
	if ct == types[0] {
		return nil // the common exact type, no parameters: ParseMediaType's map spared
	}
	mt, params, err := mime.ParseMediaType(ct)
	known := false
	for _, t := range types {
		known = known || (err == nil && mt == t)
	}
	if !known {
		return newProblem(http.StatusUnsupportedMediaType, "Content-Type",
			fmt.Sprintf("Content-Type must be %s (got %q)", want, ct))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return newProblem(http.StatusUnsupportedMediaType, "Content-Type",
			fmt.Sprintf("charset %q is not accepted: a JSON body is UTF-8 (RFC 8259); send charset=utf-8 or none (got %q)", cs, ct))
	}
	return nil
}

// decodeBody reads r's body (at most limit bytes, under body.go's bounds)
// and decodes exactly one JSON value of it into v, strictly: field names
// exactly as v's json tags spell them, none repeated (400 naming it).
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any) *problem {
	body, p := readBody(w, r, limit)
	if p != nil {
		return p
	}
	return decodeStrict(body, "", limit, v)
}

// decodeStrict decodes exactly one JSON value of data into v, with every
// field name checked by strictjson; prefix is the path of data in the
// request ("jobs[3]" for a batch element). v points to a zero request
// value (jobRequest, batchRequest).
func decodeStrict(data []byte, prefix string, limit int64, v any) *problem {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		// encoding/json decodes null into a struct as nothing at all, which
		// would then read as an object without its required fields.
		return newProblem(http.StatusBadRequest, prefix, orBody(prefix)+" must be a JSON object (got null)")
	}
	if err := strictjson.Check(data, v, "json"); err != nil {
		var fe *strictjson.Error
		if !errors.As(err, &fe) {
			return decodeProblem(err, prefix, limit)
		}
		f := fieldName(prefix, fe.Path)
		if fe.Kind == strictjson.Repeated {
			return newProblem(http.StatusBadRequest, f, fmt.Sprintf("field %q appears more than once; give each field once", f))
		}
		return newProblem(http.StatusBadRequest, f, fmt.Sprintf("unknown field %q (field names are case-sensitive)", f))
	}
	if unmarshalClean(data, v) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeProblem(err, prefix, limit)
	}
	var rest json.RawMessage
	if err := dec.Decode(&rest); err != io.EOF {
		return newProblem(http.StatusBadRequest, prefix, orBody(prefix)+" must hold one JSON object and nothing after it")
	}
	return nil
}

// unmarshalClean decodes data into v, a pointer to a zero value, with
// json.Unmarshal (no Decoder, no copy of data) and reports whether that
// succeeded; if not, it leaves *v zero, for decodeStrict's Decoder to decode
// it again and name the problem. Success means what the Decoder's success
// means: data is one JSON value and white space, decoded as the Decoder
// decodes it. DisallowUnknownFields adds nothing after strictjson.Check for
// the request types, whose field names (plain tags, nothing embedded)
// strictjson reads as encoding/json does.
func unmarshalClean(data []byte, v any) bool {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || !rv.Elem().IsZero() {
		return false
	}
	if json.Unmarshal(data, v) == nil {
		return true
	}
	rv.Elem().SetZero()
	return false
}

// decodeProblem turns a json.Decoder error into a 400 naming the field (or a
// 413 when the body hit the size limit). prefix is the path of the decoded
// value ("jobs[3]" for a batch element).
func decodeProblem(err error, prefix string, limit int64) *problem {
	var (
		maxErr  *http.MaxBytesError
		typeErr *json.UnmarshalTypeError
		synErr  *json.SyntaxError
	)
	switch {
	case errors.As(err, &maxErr):
		p := newProblem(http.StatusRequestEntityTooLarge, "", fmt.Sprintf("the body exceeds the limit of %d bytes", limit))
		p.Limit = limit
		return p
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return newProblem(http.StatusBadRequest, prefix, fmt.Sprintf("%s must be a JSON object (got %s)", orBody(prefix), typeErr.Value))
		}
		f := fieldName(prefix, typeErr.Field)
		return newProblem(http.StatusBadRequest, f, fmt.Sprintf("%s must be %s (got %s)", f, jsonKind(typeErr.Type.Kind().String()), typeErr.Value))
	case errors.As(err, &synErr):
		return newProblem(http.StatusBadRequest, prefix, fmt.Sprintf("malformed JSON in %s at byte %d: %v", orBody(prefix), synErr.Offset, synErr))
	case errors.Is(err, io.EOF):
		return newProblem(http.StatusBadRequest, prefix, orBody(prefix)+" is empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newProblem(http.StatusBadRequest, prefix, "malformed JSON in "+orBody(prefix)+": unexpected end")
	}
	// A connection error never reaches the client: it names socket
	// addresses. (Bodies are read before they are decoded, so it is not
	// expected here.)
	var netErr net.Error
	if errors.As(err, &netErr) {
		p := newProblem(http.StatusBadRequest, "", "the body could not be read")
		p.err = err
		return p
	}
	// DisallowUnknownFields reports `json: unknown field "name"`; it has no
	// error type of its own.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if unq, qerr := strconv.Unquote(name); qerr == nil {
			name = unq
		}
		f := fieldName(prefix, name)
		return newProblem(http.StatusBadRequest, f, fmt.Sprintf("unknown field %q", f))
	}
	return newProblem(http.StatusBadRequest, prefix, fmt.Sprintf("malformed JSON in %s: %v", orBody(prefix), err))
}

func orBody(prefix string) string {
	if prefix == "" {
		return "the body"
	}
	return prefix
}

// jsonKind names the JSON type a Go kind is decoded from.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string", kind == "ptr":
		return "a string"
	case kind == "slice", kind == "array":
		return "an array"
	case kind == "map", kind == "struct":
		return "an object"
	}
	return "a " + kind
}

// decodeJob decodes and validates one batch element.
func decodeJob(raw json.RawMessage, prefix string, now time.Time, maxDelay time.Duration) (job, *problem) {
	var req jobRequest
	if p := decodeStrict(raw, prefix, 0, &req); p != nil {
		return job{}, p
	}
	return validateJob(req, prefix, now, maxDelay)
}

// validateJob checks one decoded job:
//   - type is required and keys.ValidID (422);
//   - id, when given, is keys.ValidID (422; "" too);
//   - cost defaults to 1 and must be >= 1 (422);
//   - deadline, when given, is RFC 3339 (400 otherwise) and after now (422);
//   - not_before / delay and heartbeat as validateTiming says.
func validateJob(req jobRequest, prefix string, now time.Time, maxDelay time.Duration) (job, *problem) {
	unprocessable := func(name, format string, args ...any) (job, *problem) {
		f := fieldName(prefix, name)
		return job{}, newProblem(http.StatusUnprocessableEntity, f, f+" "+fmt.Sprintf(format, args...))
	}
	var id string
	if req.ID != nil {
		id = *req.ID
	}
	j := job{typ: req.Type, id: id, payload: req.Payload, cost: 1, field: prefix}
	switch {
	case req.Type == "":
		return unprocessable("type", "is required")
	case !keys.ValidID(req.Type):
		return unprocessable("type", "must be %s (got %q)", keys.IDRule, req.Type)
	case req.ID != nil && !keys.ValidID(id):
		return unprocessable("id", "must be %s (got %q); leave it out for no id", keys.IDRule, id)
	}
	if req.Cost != nil {
		if *req.Cost < 1 {
			return unprocessable("cost", "must be >= 1 (got %d)", *req.Cost)
		}
		j.cost = *req.Cost
	}
	if req.Deadline != nil {
		d, err := time.Parse(time.RFC3339Nano, *req.Deadline)
		if err != nil {
			f := fieldName(prefix, "deadline")
			return job{}, newProblem(http.StatusBadRequest, f,
				fmt.Sprintf("%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z (got %q)", f, *req.Deadline))
		}
		if !d.After(now) {
			return unprocessable("deadline", "is in the past (%s, now %s)", d.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
		}
		j.deadline = &d
	}
	return validateTiming(j, req, now, maxDelay)
}

// decodeSingle reads the body of POST /v1/jobs.
func decodeSingle(w http.ResponseWriter, r *http.Request, snap *snapshot, now time.Time) ([]job, *problem) {
	var req jobRequest
	if p := decodeBody(w, r, snap.maxBody, &req); p != nil {
		return nil, p
	}
	j, p := validateJob(req, "", now, snap.maxDelay)
	if p != nil {
		return nil, p
	}
	return []job{j}, nil
}

// decodeBatch reads the body of POST /v1/jobs:batch. An absent or empty
// "jobs" is a 422; more than snap.maxBatch jobs is a 413 naming the limit
// (like a body over max_body_bytes, it is a size limit of one request).
// Client ids must be unique within the batch (422 naming the second one).
func decodeBatch(w http.ResponseWriter, r *http.Request, snap *snapshot, now time.Time) ([]job, *problem) {
	var req batchRequest
	if p := decodeBody(w, r, snap.maxBody, &req); p != nil {
		return nil, p
	}
	switch {
	case len(req.Jobs) == 0:
		return nil, newProblem(http.StatusUnprocessableEntity, "jobs", "jobs must be a non-empty array of jobs")
	case len(req.Jobs) > snap.maxBatch:
		p := newProblem(http.StatusRequestEntityTooLarge, "jobs",
			fmt.Sprintf("jobs holds %d jobs, over the limit of %d per batch", len(req.Jobs), snap.maxBatch))
		p.Limit = int64(snap.maxBatch)
		return nil, p
	}
	jobs := make([]job, 0, len(req.Jobs))
	seen := map[string]string{}
	for i, raw := range req.Jobs {
		j, p := decodeJob(raw, "jobs["+strconv.Itoa(i)+"]", now, snap.maxDelay)
		if p != nil {
			return nil, p
		}
		if j.id != "" {
			if first, dup := seen[j.id]; dup {
				f := fieldName(j.field, "id")
				return nil, newProblem(http.StatusUnprocessableEntity, f, fmt.Sprintf("%s repeats the id of %s (%q)", f, first, j.id))
			}
			seen[j.id] = fieldName(j.field, "id")
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}
