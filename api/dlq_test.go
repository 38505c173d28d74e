package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/dlq"
	"github.com/sluicehq/sluice/jobstate"
	"github.com/sluicehq/sluice/queue"
)

// deadLetter writes a dead letter of tenant's job id as the Kafka backend's
// finish does (job_state_settle.lua); raw nil stores a poison job.
func (s *server) deadLetter(t *testing.T, tenant, id string, raw []byte) {
	t.Helper()
	if raw == nil {
		raw = []byte("not an envelope")
	}
	rec, err := dlq.Encode(queue.DeadLetter{Reason: "rejected", Status: 422, Attempts: 1, Error: "status 422", At: time.Now()}, raw)
	if err != nil {
		t.Fatal(err)
	}
	c := jobstate.Settle{Tenant: tenant, JobID: id, Member: id + "|1", State: jobstate.Dead, Reason: "rejected",
		DeadLetter: rec, DiedAt: time.Now()}.Call()
	if err := c.Run(context.Background(), s.rdb).Err(); err != nil {
		t.Fatal(err)
	}
}

// checkDLQ exercises the dead-letter operations of tenant A.
func (s *server) checkDLQ(t *testing.T) {
	a := s.tenantA
	env := queue.Envelope{Version: queue.EnvelopeVersion, ID: "dead-1", Tenant: a, Type: "email", Cost: 1, Attempt: 2,
		Payload: json.RawMessage(`{"to":"x@example.com"}`), EnqueuedAt: time.Now()}
	raw, _ := env.Encode()
	s.deadLetter(t, a, "dead-1", raw)
	s.deadLetter(t, a, "dead-2", nil)
	base := "/admin/v1/tenants/" + a + "/dlq"
	admin := func(method, path, body string) req {
		return req{method: method, path: path, auth: adminToken, body: body}
	}

	s.expect(t, "dlq list", 200, admin("GET", base, ""))
	s.expect(t, "dlq list, a page", 200, admin("GET", base+"?limit=1", ""))
	s.expect(t, "dlq list, bad limit", 400, admin("GET", base+"?limit=0", ""))
	s.expect(t, "dlq list, bad cursor", 400, admin("GET", base+"?cursor=x", ""))
	s.expect(t, "dlq list, tenant key", 401, req{method: "GET", path: base, auth: keyA})
	s.expect(t, "dlq list, unknown tenant", 404, admin("GET", "/admin/v1/tenants/nosuch-"+a+"/dlq", ""))
	s.expect(t, "dlq get", 200, admin("GET", base+"/dead-1", ""))
	s.expect(t, "dlq get poison", 200, admin("GET", base+"/dead-2", ""))
	s.expect(t, "dlq get unknown", 404, admin("GET", base+"/nosuch", ""))
	s.expect(t, "dlq get, no token", 401, req{method: "GET", path: base + "/dead-1"})

	redrive := base + ":redrive"
	s.expect(t, "redrive malformed", 400, admin("POST", redrive, `{"job_ids":`))
	s.expect(t, "redrive unknown field", 400, admin("POST", redrive, `{"ids":["a"]}`))
	s.expect(t, "redrive both", 422, admin("POST", redrive, `{"job_ids":["a"],"all":true}`))
	s.expect(t, "redrive none", 422, admin("POST", redrive, `{"job_ids":[]}`))
	s.expect(t, "redrive bad id", 422, admin("POST", redrive, `{"job_ids":["no*such"]}`))
	s.expect(t, "redrive text", 415, req{method: "POST", path: redrive, auth: adminToken, ctype: "text/plain", body: "x"})
	s.expect(t, "redrive too large", 413, admin("POST", redrive, `{"job_ids":["`+strings.Repeat("x", 3000)+`"]}`))
	s.expect(t, "redrive, no token", 401, req{method: "POST", path: redrive, body: `{"all":true}`})
	s.expect(t, "redrive, unknown tenant", 404, admin("POST", "/admin/v1/tenants/nosuch-"+a+"/dlq:redrive", `{"all":true}`))
	got := s.expect(t, "redrive", 200, admin("POST", redrive, `{"job_ids":["dead-1","dead-2","nosuch"]}`))
	if string(got.body) != `{"redriven":1,"skipped":[{"job_id":"dead-2","reason":"poison"}]}`+"\n" {
		t.Errorf("redrive: %s, want dead-1 redriven and dead-2 skipped as poison", got.body)
	}
	s.expect(t, "redrive all", 200, admin("POST", redrive, `{"all":true}`))

	s.expect(t, "dlq delete one", 200, admin("DELETE", base+"/dead-2", ""))
	s.expect(t, "dlq delete one again", 404, admin("DELETE", base+"/dead-2", ""))
	s.expect(t, "dlq delete one, no token", 401, req{method: "DELETE", path: base + "/dead-2"})
	s.deadLetter(t, a, "dead-3", nil)
	s.expect(t, "dlq delete all", 200, admin("DELETE", base, ""))
	s.expect(t, "dlq delete all, no token", 401, req{method: "DELETE", path: base})
	s.expect(t, "dlq delete all, unknown tenant", 404, admin("DELETE", "/admin/v1/tenants/nosuch-"+a+"/dlq", ""))
}

// checkDLQDown checks the dead-letter operations of tenant A with Redis
// stopped: 503.
func (s *server) checkDLQDown(t *testing.T) {
	base := "/admin/v1/tenants/" + s.tenantA + "/dlq"
	s.expect(t, "dlq list", 503, req{method: "GET", path: base, auth: adminToken})
	s.expect(t, "dlq get", 503, req{method: "GET", path: base + "/x", auth: adminToken})
	s.expect(t, "dlq redrive", 503, req{method: "POST", path: base + ":redrive", auth: adminToken, body: `{"all":true}`})
	s.expect(t, "dlq delete one", 503, req{method: "DELETE", path: base + "/x", auth: adminToken})
	s.expect(t, "dlq delete all", 503, req{method: "DELETE", path: base, auth: adminToken})
}

// The dead-letter routes' checks, a conformanceGroup of TestHandlersMatchSpec.
func init() {
	addConformanceGroup(conformanceGroup{
		name:      "dlq",
		run:       func(t *testing.T, s *server) { s.checkDLQ(t) },
		redisDown: func(t *testing.T, s *server) { s.checkDLQDown(t) },
	})
}
