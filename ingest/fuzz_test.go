package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// The fuzz targets of this file send fuzzed bodies of POST /v1/jobs and POST
// /v1/jobs:batch through a real ingest Server (httptest, real TCP) on the
// shared Redis, and check what must hold for any input:
//
//   - an answer always comes (a handler panic closes the connection);
//   - its status is one of 202 400 401 408 413 415 422 429, or 503 with
//     Retry-After while the backend is really down (it never is here);
//   - every error is problem+json with a non-empty detail, its status
//     repeated, and no socket address of the connection in it;
//   - on a 202 every new envelope on the tenant's list has a valid type and
//     1 <= cost <= the tenant's largest job cost (fuzzMaxCost), the backlog
//     grew by their sum, and both keys have a TTL;
//   - on any other answer the tenant's queue length and backlog are as they
//     were;
//   - a 202 came from a strict body: every job-level field name is one of the
//     documented ones, exactly spelt, none repeated, no empty id, and no
//     Content-Encoding the server does not decode.
//
// One server and its tenants (random names) are built per fuzz process and
// reused by every input; each input's Redis state is deleted after it, so
// inputs are independent and reproducible (the clock is fixed).

// fuzzTenant is one tenant of the fuzz server.
type fuzzTenant struct {
	name string
	// yaml is its configuration body (tenantYAML).
	yaml string
	// maxCost is the largest cost a job of each type may have: the smallest
	// of the capacities of the policies the job is charged to and of the
	// tenant's outflow bucket ("" is every other type).
	maxCost map[string]int64
	// policies are the admission state keys' (algorithm, policy) pairs.
	policies [][2]string
}

// fuzzMaxCost is the largest cost tenant t may queue for a job of type typ.
func (t *fuzzTenant) fuzzMaxCost(typ string) int64 {
	if c, ok := t.maxCost[typ]; ok {
		return c
	}
	return t.maxCost[""]
}

// fuzzEnv is the per-process fuzz server.
type fuzzEnv struct {
	h       *harness
	rdb     *redis.Client
	tenants []*fuzzTenant
	client  *http.Client
}

// newFuzzEnv builds the fuzz server with three tenants:
//   - open: no admission policy, an outflow bucket of 50 (rate 5/s);
//   - gcra: gcra 100/s burst 200, job type email on a token bucket 10/s
//     burst 20, outflow capacity 1000, max_backlog 100000, fails open;
//   - deny: sliding_window 500/s, fails closed, outflow capacity 100.
func newFuzzEnv(f *testing.F) *fuzzEnv {
	rdb := testenv.Redis(f)
	open := &fuzzTenant{name: testenv.Name(f, "fz-open"),
		maxCost: map[string]int64{"": 50}}
	open.yaml = "    outflow: {rate: 5, capacity: 50}\n"
	gcra := &fuzzTenant{name: testenv.Name(f, "fz-gcra"),
		maxCost:  map[string]int64{"": 200, "email": 20},
		policies: [][2]string{{"gcra", "tenant"}, {"token_bucket", "type.email"}}}
	gcra.yaml = "    admission: {algorithm: gcra, limit: 100, period: 1s, burst: 200}\n" +
		"    job_types:\n      email:\n        admission: {algorithm: token_bucket, limit: 10, period: 1s, burst: 20}\n" +
		"    outflow: {rate: 100, capacity: 1000, max_backlog: 100000}\n"
	deny := &fuzzTenant{name: testenv.Name(f, "fz-deny"),
		maxCost:  map[string]int64{"": 100},
		policies: [][2]string{{"sliding_window", "tenant"}}}
	deny.yaml = "    admission: {algorithm: sliding_window, limit: 500, period: 1s}\n" +
		"    on_limiter_error: deny\n    outflow: {rate: 10, capacity: 100}\n"
	ts := []*fuzzTenant{open, gcra, deny}
	var ys []string
	for _, t := range ts {
		ys = append(ys, tenantYAML(t.name, t.yaml))
	}
	// testConfig's limits, with a Redis timeout long enough that a loaded
	// machine never turns a slow admission into a 503: here every 503 is a
	// bug.
	y := "redis:\n  timeout: 10s\ningest:\n  max_body_bytes: 2048\n  max_batch_jobs: 5\n  retry_after: 2s\n  shutdown_timeout: 5s\n" +
		"tenants:\n" + strings.Join(ys, "")
	cfg, err := config.Parse([]byte(y))
	if err != nil {
		f.Fatalf("config.Parse: %v\n%s", err, y)
	}
	env := &fuzzEnv{
		h:       startIngest(f, cfg, deps{rdb: rdb, clock: newFixedClock()}),
		rdb:     rdb,
		tenants: ts,
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}},
	}
	f.Cleanup(func() {
		for _, t := range ts {
			fuzzDeleteAll(rdb, t.name)
		}
	})
	return env
}

// fuzzDeleteAll deletes every key of tenant (the idempotency and job-state
// keys of jobs no input cleaned up).
func fuzzDeleteAll(rdb *redis.Client, tenant string) {
	ctx := context.Background()
	it := rdb.Scan(ctx, 0, "sluice:{"+tenant+"}*", 1000).Iterator()
	for it.Next(ctx) {
		rdb.Del(ctx, it.Val())
	}
}

// pendingFixes are the invariants whose fixes are still open in issue 7: a
// violation of one skips the input naming the item instead of failing it,
// so the fuzzer keeps looking for other bugs. Delete an entry once it is
// fixed; the seeds and testdata inputs that exercise it then pass.
var pendingFixes = map[string]string{}

// violation reports a broken invariant of kind ("cost", "strict", "" for
// anything else): a failure, or a skip when kind's fix is pending.
func violation(t *testing.T, kind, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if item, ok := pendingFixes[kind]; ok {
		t.Skipf("known bug, fixed by %s: %s", item, msg)
	}
	t.Fatal(msg)
}

// fuzzContentTypes and fuzzEncodings are what the ct and ce inputs pick.
var (
	fuzzContentTypes = []string{"application/json", "application/json; charset=utf-8", "text/plain", ""}
	fuzzEncodings    = []string{"", "gzip", "identity"}
)

// fuzzStatuses are the statuses a submission may answer with (503 only
// with the backend down, checked apart).
var fuzzStatuses = map[int]bool{202: true, 400: true, 401: true, 408: true, 413: true, 415: true, 422: true, 429: true}

// fuzzSeeds are the bodies of the cases, for both targets.
var (
	fuzzSingleSeeds = []string{
		`{"type":"ok","cost":9223372036854775807}`,
		`{"type":"ok","cost":9223372036854775806}`,
		`{"TYPE":"ok","Cost":1}`,
		`{"cost":-1,"cost":1}`,
		`{"type":"ok","cost":-1,"cost":1}`,
		`{"type":"ok","cost":1,"type":"ok"}`,
		`{"type":"ok","id":""}`,
		`{"type":"ok","id":"."}`,
		`{"type":"ok","id":".."}`,
		`{"type":"_other","id":"_other"}`,
		`{"":1,"type":"ok"}`,
		`{"type":"ok","payload":{"":1,"a":1,"a":2}}`,
		`{"type":"email","payload":{"to":"a@example.com"},"id":"j-1","cost":3,"deadline":"2099-01-02T04:00:00Z"}`,
		`{"type":"email","cost":21}`,
		`{"type":"ok","cost":51}`,
		`{"type":"ok","deadline":"2000-01-01T00:00:00Z"}`,
		`{"type":"ok","dedline":"2099-01-01T00:00:00Z"}`,
		`{"type":"ok"} {}`,
		`{"type":"ok","payload":{"a":[1,2,{"b":null}]},"cost":1e2}`,
		`[]`, ``, `{`,
	}
	fuzzBatchSeeds = []string{
		`{"jobs":[{"type":"ok","cost":9223372036854775807},{"type":"ok","cost":9223372036854775807},{"type":"ok","cost":3}]}`,
		`{"jobs":[{"type":"ok","cost":9223372036854775807},{"type":"ok","cost":2}]}`,
		`{"jobs":[{"type":"ok","cost":9223372036854775807}]}`,
		`{"jobs":[{"TYPE":"ok","Cost":1}]}`,
		`{"JOBS":[{"type":"ok"}]}`,
		`{"jobs":[{"cost":-1,"cost":1,"type":"ok"}]}`,
		`{"jobs":[{"type":"ok"}],"jobs":[{"type":"ok"}]}`,
		`{"jobs":[{"type":"ok","id":""}]}`,
		`{"jobs":[{"":1,"type":"ok"}]}`,
		`{"":[],"jobs":[{"type":"ok"}]}`,
		`{"jobs":[1,{"type":"ok","Type":"ok"}]}`,
		`{"jobs":[{"type":"ok","id":"."},{"type":"ok","id":".."},{"type":"_other","id":"_other"}]}`,
		`{"jobs":[{"type":"email","id":"a","cost":10},{"type":"email","id":"a","cost":10}]}`,
		`{"jobs":[{"type":"email","cost":10},{"type":"email","cost":11},{"type":"ok","cost":100}]}`,
		`{"jobs":[{"type":"ok"},{"type":"ok"},{"type":"ok"},{"type":"ok"},{"type":"ok"},{"type":"ok"}]}`,
		`{"jobs":[]}`, `{"jobs":null}`, `{"jobs":[null]}`, `{"jobs":[1]}`, `{}`,
	}
)

// addFuzzSeeds adds every seed body for each tenant (and one without a
// valid key), as JSON and as text/plain, and gzip-labelled.
func addFuzzSeeds(f *testing.F, bodies []string) {
	for _, b := range bodies {
		for tenant := range uint8(3) {
			f.Add(tenant, uint8(0), uint8(0), b)
		}
	}
	f.Add(uint8(3), uint8(0), uint8(0), bodies[0])
	f.Add(uint8(1), uint8(2), uint8(0), bodies[0])
	f.Add(uint8(1), uint8(0), uint8(1), bodies[len(bodies)-1])
	f.Add(uint8(1), uint8(1), uint8(2), bodies[0])
}

// FuzzJob fuzzes the body of POST /v1/jobs (decodeSingle, validateJob).
func FuzzJob(f *testing.F) {
	addFuzzSeeds(f, fuzzSingleSeeds)
	env := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, tenant, ct, ce uint8, body string) {
		env.check(t, false, tenant, ct, ce, body)
	})
}

// FuzzJobBatch fuzzes the body of POST /v1/jobs:batch (decodeBatch,
// decodeJob, validateJob).
func FuzzJobBatch(f *testing.F) {
	addFuzzSeeds(f, fuzzBatchSeeds)
	env := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, tenant, ct, ce uint8, body string) {
		env.check(t, true, tenant, ct, ce, body)
	})
}

// redisState is what a refused request must leave as it was.
type redisState struct {
	queueLen int64
	backlog  int64
}

func (e *fuzzEnv) state(t *testing.T, tenant string) redisState {
	t.Helper()
	ctx := context.Background()
	pipe := e.rdb.Pipeline()
	n := pipe.LLen(ctx, keys.Queue(tenant))
	b := pipe.Get(ctx, keys.Backlog(tenant))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("read %s's queue and backlog: %v", tenant, err)
	}
	s := redisState{queueLen: n.Val()}
	if b.Err() == nil {
		v, err := strconv.ParseInt(b.Val(), 10, 64)
		if err != nil {
			t.Fatalf("backlog of %s is %q: %v", tenant, b.Val(), err)
		}
		s.backlog = v
	}
	return s
}

// reset deletes what an input may have written for tenant: its queue,
// backlog, sequences and admission state, and the job-state and idempotency
// keys of envs.
func (e *fuzzEnv) reset(ft *fuzzTenant, envs []queue.Envelope) {
	ks := []string{keys.Queue(ft.name), keys.Backlog(ft.name), keys.JobSeq(ft.name), keys.JobsDispatched(ft.name)}
	for _, p := range ft.policies {
		ks = append(ks, keys.Admission(ft.name, p[0], p[1]))
	}
	for _, env := range envs {
		ks = append(ks, keys.JobState(ft.name, env.ID), keys.Idempotency(ft.name, env.ID))
	}
	e.rdb.Del(context.Background(), ks...)
}

// check sends one fuzzed submission and checks the invariants of the file
// comment.
func (e *fuzzEnv) check(t *testing.T, batch bool, tenant, ct, ce uint8, body string) {
	ft := e.tenants[int(tenant)%len(e.tenants)]
	key := apiKey(ft.name)
	if int(tenant)%(len(e.tenants)+1) == len(e.tenants) {
		key = "no-such-key"
	}
	contentType := fuzzContentTypes[int(ct)%len(fuzzContentTypes)]
	encoding := fuzzEncodings[int(ce)%len(fuzzEncodings)]
	path := "/v1/jobs"
	if batch {
		path = "/v1/jobs:batch"
	}

	before := e.state(t, ft.name)
	var envs []queue.Envelope
	defer func() { e.reset(ft, envs) }()

	req, err := http.NewRequest(http.MethodPost, e.h.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	var local, remote string
	req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(ci httptrace.GotConnInfo) {
			local, remote = ci.Conn.LocalAddr().String(), ci.Conn.RemoteAddr().String()
		},
	}))
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s %q: no answer (a handler panic closes the connection): %v", path, body, err)
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("POST %s %q: reading the answer: %v", path, body, err)
	}
	status := resp.StatusCode
	after := e.state(t, ft.name)

	if status != http.StatusAccepted {
		field := e.checkRefusal(t, resp, answer, local, remote, overCost(ft, []byte(body), batch))
		if f := strictProblem([]byte(body), batch); f.isName && status == http.StatusBadRequest {
			switch {
			case f.name == "" && (field == "" || field == strings.TrimSuffix(f.field, ".")):
				violation(t, "empty-name", "400 for %q names field %q for its member named \"\"", body, field)
			case f.name != "" && field == "":
				// Not necessarily f.field: a batch's top-level names and its
				// earlier elements' problems come first.
				t.Fatalf("400 for %q names no field, but the body has %s", body, f.msg)
			}
		}
		if after != before {
			violation(t, "", "%d for %q, but the tenant's Redis state changed: before %+v, after %+v", status, body, before, after)
		}
		return
	}

	// 202: what was queued.
	vals, err := e.rdb.LRange(context.Background(), keys.Queue(ft.name), before.queueLen, -1).Result()
	if err != nil {
		t.Fatalf("LRANGE: %v", err)
	}
	for i, v := range vals {
		env, err := queue.Decode([]byte(v))
		if err != nil {
			t.Fatalf("202 for %q, but queued job %d does not decode: %v", body, i, err)
		}
		envs = append(envs, env)
	}
	if len(envs) == 0 && resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("202 for %q, but nothing was queued: %s", body, answer)
	}
	if f := strictProblem([]byte(body), batch); f.msg != "" {
		violation(t, "strict", "202 for %q, which is not strict JSON: %s", body, f.msg)
	}
	if encoding == "gzip" {
		violation(t, "strict", "202 for %q sent with Content-Encoding: gzip, which the server does not decode", body)
	}
	var sum int64
	for i, env := range envs {
		if max := ft.fuzzMaxCost(env.Type); env.Cost < 1 || env.Cost > max {
			violation(t, "cost", "202 for %q queued job %d of type %q with cost %d, outside [1, %d]", body, i, env.Type, env.Cost, max)
		}
		if !keys.ValidID(env.Type) || env.Tenant != ft.name {
			t.Fatalf("202 for %q queued job %d with type %q, tenant %q", body, i, env.Type, env.Tenant)
		}
		sum += env.Cost
	}
	if got, want := after.backlog-before.backlog, sum; got != want {
		t.Fatalf("202 for %q: backlog grew by %d, want the queued cost %d", body, got, want)
	}
	for _, k := range []string{keys.Queue(ft.name), keys.Backlog(ft.name)} {
		if len(envs) == 0 {
			break
		}
		if pttl := e.rdb.PTTL(context.Background(), k).Val(); pttl <= 0 {
			t.Fatalf("202 for %q: key %s has PTTL %v, want a TTL", body, k, pttl)
		}
	}
}

// checkRefusal checks a non-202 answer: its status, problem+json body and
// that it echoes no socket address of the connection; it returns the
// problem's field.
//
// costly says the body holds a cost above the tenant's largest or costs
// whose sum overflows: a 503 for it is the unchecked cost arithmetic of
// issue 7 requirement 1.
func (e *fuzzEnv) checkRefusal(t *testing.T, resp *http.Response, answer []byte, local, remote string, costly bool) string {
	t.Helper()
	status := resp.StatusCode
	if status == http.StatusServiceUnavailable {
		up := e.rdb.Ping(context.Background()).Err() == nil
		kind := ""
		if costly {
			kind = "cost"
		}
		if resp.Header.Get("Retry-After") == "" || up {
			violation(t, kind, "503 (Retry-After %q) while Redis answers PING (%v): %s",
				resp.Header.Get("Retry-After"), up, answer)
		}
	} else if !fuzzStatuses[status] {
		t.Fatalf("status %d, want one of 202 400 401 408 413 415 422 429: %s", status, answer)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("%d with Content-Type %q, want application/problem+json: %s", status, ct, answer)
	}
	var p struct {
		Status int    `json:"status"`
		Detail string `json:"detail"`
		Field  string `json:"field"`
	}
	if err := json.Unmarshal(answer, &p); err != nil {
		t.Fatalf("%d with a body that is not a problem object: %v: %s", status, err, answer)
	}
	if p.Status != status || strings.TrimSpace(p.Detail) == "" {
		t.Fatalf("%d with problem status %d and detail %q, want the status and a detail", status, p.Status, p.Detail)
	}
	for _, addr := range []string{local, remote} {
		if addr != "" && strings.Contains(string(answer), addr) {
			t.Fatalf("%d echoes the socket address %s: %s", status, addr, answer)
		}
	}
	if _, port, err := net.SplitHostPort(local); err == nil && strings.Contains(string(answer), ":"+port+"->") {
		t.Fatalf("%d echoes the connection: %s", status, answer)
	}
	return p.Field
}

// overCost says whether body, read as leniently as encoding/json does, holds
// a job whose cost is above ft's largest for its type, or costs whose sum
// overflows an int64.
func overCost(ft *fuzzTenant, body []byte, batch bool) bool {
	type costed struct {
		Type string
		Cost json.Number
	}
	var jobs []costed
	if batch {
		var b struct{ Jobs []costed }
		_ = json.Unmarshal(body, &b)
		jobs = b.Jobs
	} else {
		var j costed
		_ = json.Unmarshal(body, &j)
		jobs = []costed{j}
	}
	var sum int64
	for _, j := range jobs {
		c, err := j.Cost.Int64()
		if err != nil {
			continue
		}
		if c > ft.fuzzMaxCost(j.Type) || (c > 0 && sum > math.MaxInt64-c) {
			return true
		}
		sum += c
	}
	return false
}

// Field names of a job and of a batch, exactly as documented.
var (
	jobFields   = map[string]bool{"type": true, "payload": true, "id": true, "deadline": true, "cost": true}
	batchFields = map[string]bool{"jobs": true}
)

// strictFinding is why a body is not strict JSON for a submission.
type strictFinding struct {
	// msg says what is wrong; "" when the body is strict (or not a
	// well-formed object at all).
	msg string
	// isName says the finding is an unknown or repeated member name (a 400
	// that must name it), not an empty id (a 422).
	isName bool
	// field is that member's path as a problem names it ("cost",
	// "jobs[3].cost"), and name the member's name.
	field, name string
	// stop says the body is malformed there: nothing after it is read (a
	// json.Decoder's error is sticky while More still peeks).
	stop bool
}

// done says the walk ends at f: a finding or a malformed body.
func (f strictFinding) done() bool { return f.msg != "" || f.stop }

// strictProblem finds the first reason body is not strict JSON for a
// submission: a member name at job or batch level that is not exactly one
// of the documented ones, or is repeated, or an empty id. A payload is
// anything. A body that is not valid JSON has no finding: the server may
// refuse it as malformed before it looks at names.
func strictProblem(body []byte, batch bool) strictFinding {
	if !json.Valid(body) {
		return strictFinding{}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if !batch {
		return strictObject(dec, jobFields, "", nil)
	}
	return strictObject(dec, batchFields, "", func(name string) strictFinding {
		return strictArray(dec, func(i int) strictFinding {
			return strictObject(dec, jobFields, fmt.Sprintf("jobs[%d].", i), nil)
		})
	})
}

// strictObject reads one object from dec and checks its member names
// against allowed; member, when set, reads each member's value instead of
// skipping it.
func strictObject(dec *json.Decoder, allowed map[string]bool, prefix string, member func(string) strictFinding) strictFinding {
	tok, err := dec.Token()
	if d, isDelim := tok.(json.Delim); err != nil || (isDelim && d != '{') {
		return strictFinding{stop: true}
	}
	if tok != json.Delim('{') {
		return strictFinding{} // a scalar: the server refuses it
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return strictFinding{stop: true}
		}
		name, _ := tok.(string)
		switch {
		case !allowed[name]:
			return strictFinding{msg: fmt.Sprintf("unknown field %q", prefix+name), isName: true, field: prefix + name, name: name}
		case seen[name]:
			return strictFinding{msg: fmt.Sprintf("repeated field %q", prefix+name), isName: true, field: prefix + name, name: name}
		}
		seen[name] = true
		if member != nil {
			if f := member(name); f.done() {
				return f
			}
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return strictFinding{stop: true}
		}
		if name == "id" && string(v) == `""` {
			return strictFinding{msg: fmt.Sprintf("empty %q", prefix+name)}
		}
	}
	_, _ = dec.Token() // }
	return strictFinding{}
}

// strictArray reads one array from dec, element i by elem.
func strictArray(dec *json.Decoder, elem func(i int) strictFinding) strictFinding {
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('[') {
		return strictFinding{stop: true}
	}
	for i := 0; dec.More(); i++ {
		if f := elem(i); f.done() {
			return f
		}
	}
	_, _ = dec.Token() // ]
	return strictFinding{}
}
