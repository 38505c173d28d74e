package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/queue"
)

// The checks FuzzJob and FuzzJobBatch run on every input (fuzz_test.go).

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
