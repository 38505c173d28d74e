package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// seen is one request as a recorder saw it.
type seen struct {
	Method, Path, ContentType, Auth, Body, Query string
}

// recorder answers every request with status and body and records it.
type recorder struct {
	mu     sync.Mutex
	status int
	body   string
	got    []seen
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.got = append(rec.got, seen{r.Method, r.URL.EscapedPath(), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b), r.URL.RawQuery})
	rec.mu.Unlock()
	if rec.status >= 400 {
		w.Header().Set("Content-Type", "application/problem+json")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rec.status)
	_, _ = io.WriteString(w, rec.body)
}

func newRecorder(t *testing.T, status int, body string) (*recorder, string) {
	rec := &recorder{status: status, body: body}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv.URL
}

const tenantBody = `{"id":"acme","source":"runtime","version":3,"spec":{
	"api_keys":["sha256:00"],
	"admission":{"algorithm":"gcra","limit":10,"period":"1s","burst":5},
	"job_types":{"encode":{"admission":{"algorithm":"fixed_window","limit":2,"period":"1m0s"},"target":{"url":"http://t/enc","timeout":"10s"}}},
	"outflow":{"rate":5,"capacity":5,"max_backlog":10000,"adaptive":true,"min_rate":0.5},
	"target":{"url":"http://127.0.0.1:9000/hook","timeout":"10s"},"on_limiter_error":"allow"}}`

func wantTenant() Tenant {
	on := true
	return Tenant{ID: "acme", Source: "runtime", Version: 3, Spec: TenantSpec{
		APIKeys:   []string{"sha256:00"},
		Admission: Admission{Algorithm: "gcra", Limit: 10, Period: Duration(time.Second), Burst: 5},
		JobTypes: map[string]JobType{"encode": {
			Admission: Admission{Algorithm: "fixed_window", Limit: 2, Period: Duration(time.Minute)},
			Target:    Target{URL: "http://t/enc", Timeout: Duration(10 * time.Second)},
		}},
		Outflow:        Outflow{Rate: 5, Capacity: 5, MaxBacklog: 10000, Adaptive: &on, MinRate: 0.5},
		Target:         Target{URL: "http://127.0.0.1:9000/hook", Timeout: Duration(10 * time.Second)},
		OnLimiterError: "allow",
	}}
}

func TestAdminCalls(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		call   func(a *Admin) (any, error)
		want   any
		req    seen
	}{
		{
			name: "list", status: 200, body: `{"tenants":[` + tenantBody + `]}`,
			call: func(a *Admin) (any, error) { return a.Tenants(ctx) },
			want: []Tenant{wantTenant()},
			req:  seen{Method: "GET", Path: "/admin/v1/tenants"},
		},
		{
			name: "get", status: 200, body: tenantBody,
			call: func(a *Admin) (any, error) { return a.Tenant(ctx, "acme") },
			want: wantTenant(),
			req:  seen{Method: "GET", Path: "/admin/v1/tenants/acme"},
		},
		{
			name: "put creates", status: 201, body: tenantBody,
			call: func(a *Admin) (any, error) {
				tn, created, err := a.PutTenant(ctx, "acme", TenantSpec{Outflow: Outflow{Rate: 2}, Target: Target{URL: "http://x", Timeout: Duration(5 * time.Second)}})
				return []any{tn.ID, created}, err
			},
			want: []any{"acme", true},
			req:  seen{Method: "PUT", Path: "/admin/v1/tenants/acme", ContentType: "application/json", Body: `{"outflow":{"rate":2},"target":{"url":"http://x","timeout":"5s"}}`},
		},
		{
			name: "put replaces", status: 200, body: tenantBody,
			call: func(a *Admin) (any, error) {
				_, created, err := a.PutTenant(ctx, "acme", TenantSpec{})
				return created, err
			},
			want: false,
			req:  seen{Method: "PUT", Path: "/admin/v1/tenants/acme", ContentType: "application/json", Body: `{}`},
		},
		{
			name: "patch", status: 200, body: tenantBody,
			call: func(a *Admin) (any, error) {
				tn, err := a.PatchTenant(ctx, "acme", map[string]any{"outflow": map[string]any{"rate": 20}})
				return tn.Version, err
			},
			want: int64(3),
			req:  seen{Method: "PATCH", Path: "/admin/v1/tenants/acme", ContentType: "application/merge-patch+json", Body: `{"outflow":{"rate":20}}`},
		},
		{
			name: "delete", status: 204,
			call: func(a *Admin) (any, error) { return nil, a.DeleteTenant(ctx, "a/b") },
			req:  seen{Method: "DELETE", Path: "/admin/v1/tenants/a%2Fb"},
		},
		{
			name: "audit page", status: 200,
			body: `{"entries":[{"at":"2030-01-02T03:04:05.5Z","who":"alice","action":"update","version":9,
				"changes":[{"path":"outflow.rate","old":"5","new":"20","truncated":false}],"changes_total":1,"truncated":false},
				{"at":"2030-01-02T03:00:00Z","who":"alice","action":"create","version":8,
				"changes":[{"path":"outflow.rate","old":null,"new":"5","truncated":false}],"changes_total":3,"truncated":true}],
				"next_cursor":"8"}`,
			call: func(a *Admin) (any, error) { return a.AuditPage(ctx, "acme", 2, "10") },
			want: AuditPage{Entries: []AuditEntry{
				{At: time.Date(2030, 1, 2, 3, 4, 5, 5e8, time.UTC), Who: "alice", Action: "update", Version: 9,
					Changes: []AuditChange{{Path: "outflow.rate", Old: ptr("5"), New: ptr("20")}}, ChangesTotal: 1},
				{At: time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC), Who: "alice", Action: "create", Version: 8,
					Changes: []AuditChange{{Path: "outflow.rate", New: ptr("5")}}, ChangesTotal: 3, Truncated: true},
			}, NextCursor: "8"},
			req: seen{Method: "GET", Path: "/admin/v1/tenants/acme/audit", Query: "cursor=10&limit=2"},
		},
		{
			name: "audit, last page", status: 200, body: `{"entries":[],"next_cursor":null}`,
			call: func(a *Admin) (any, error) { return a.Audit(ctx, "acme") },
			want: []AuditEntry(nil),
			req:  seen{Method: "GET", Path: "/admin/v1/tenants/acme/audit"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, url := newRecorder(t, tc.status, tc.body)
			got, err := tc.call(NewAdmin(url, "tok"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
			tc.req.Auth = "Bearer tok"
			if diff := cmp.Diff([]seen{tc.req}, rec.got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdminProblem(t *testing.T) {
	_, url := newRecorder(t, 422, `{"type":"about:blank","title":"Unprocessable Entity","status":422,
		"detail":"tenants.acme.outflow.rate: must be >= 0","field":"outflow.rate"}`)
	_, err := NewAdmin(url, "tok").PatchTenant(context.Background(), "acme", json.RawMessage(`{"outflow":{"rate":-1}}`))
	var apiErr *Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want *Error", err)
	}
	want := &Error{Status: 422, Type: "about:blank", Title: "Unprocessable Entity",
		Detail: "tenants.acme.outflow.rate: must be >= 0", Field: "outflow.rate", Tries: 1}
	if diff := cmp.Diff(want, apiErr); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestDurationJSON(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    Duration
		wantErr bool
	}{
		{`"1s"`, Duration(time.Second), false},
		{`"1m30s"`, Duration(90 * time.Second), false},
		{`1000000000`, Duration(time.Second), false},
		{`"soon"`, 0, true},
		{`true`, 0, true},
	} {
		var d Duration
		err := json.Unmarshal([]byte(tc.in), &d)
		if (err != nil) != tc.wantErr || d != tc.want {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v, error %v", tc.in, time.Duration(d), err, time.Duration(tc.want), tc.wantErr)
		}
	}
	b, err := json.Marshal(Duration(1500 * time.Millisecond))
	if err != nil || string(b) != `"1.5s"` {
		t.Errorf(`Marshal(1.5s) = %s, %v; want "1.5s"`, b, err)
	}
}

// TestAdminAuditFollowsCursor serves three pages: Audit asks for each with
// the cursor of the one before and returns every entry once, in order.
func TestAdminAuditFollowsCursor(t *testing.T) {
	var queries []string
	pages := map[string]string{
		"":  `{"entries":[{"version":5},{"version":4}],"next_cursor":"4"}`,
		"4": `{"entries":[{"version":3},{"version":2}],"next_cursor":"2"}`,
		"2": `{"entries":[{"version":1}],"next_cursor":null}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queries = append(queries, r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, pages[r.URL.Query().Get("cursor")])
	}))
	defer srv.Close()
	entries, err := NewAdmin(srv.URL, "tok").Audit(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	var versions []int64
	for _, e := range entries {
		versions = append(versions, e.Version)
	}
	if diff := cmp.Diff([]int64{5, 4, 3, 2, 1}, versions); diff != "" {
		t.Errorf("versions (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "cursor=4", "cursor=2"}, queries); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}

	// A server that hands back the same cursor does not loop the client.
	pages["4"] = `{"entries":[],"next_cursor":"4"}`
	if _, err := NewAdmin(srv.URL, "tok").Audit(context.Background(), "acme"); err == nil {
		t.Error("Audit with a cursor that does not move: nil error")
	}
}
