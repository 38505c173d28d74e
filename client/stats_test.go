package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func TestStats(t *testing.T) {
	rec, url := newRecorder(t, 200, `{"tenant":"acme","backlog":12,"outflow":{"configured_rate":5,"effective_rate":2.5,"measured_rate":4.9,"capacity":5},
		"water_level":2.5,"in_flight":1,"dlq":3,"eta_seconds":4.8}`)
	for name, get := range map[string]func() (Stats, error){
		"tenant key":  func() (Stats, error) { return New(url, "tok").Stats(context.Background(), "acme") },
		"admin token": func() (Stats, error) { return NewAdmin(url, "tok").Stats(context.Background(), "acme") },
	} {
		got, err := get()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := Stats{Tenant: "acme", Backlog: 12, WaterLevel: 2.5, InFlight: 1, DLQ: 3, ETASeconds: ptr(4.8),
			Outflow: OutflowStats{ConfiguredRate: 5, EffectiveRate: 2.5, MeasuredRate: 4.9, Capacity: 5}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: stats (-want +got):\n%s", name, diff)
		}
	}
	want := seen{Method: "GET", Path: "/v1/tenants/acme/stats", Auth: "Bearer tok"}
	if diff := cmp.Diff([]seen{want, want}, rec.got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestStatsUnlimitedETA(t *testing.T) {
	_, url := newRecorder(t, 200, `{"tenant":"acme","backlog":0,"outflow":{"configured_rate":0,"effective_rate":0,"measured_rate":0,"capacity":1},
		"water_level":0,"in_flight":0,"dlq":0,"eta_seconds":null}`)
	st, err := New(url, "k").Stats(context.Background(), "acme")
	if err != nil || st.ETASeconds != nil {
		t.Fatalf("Stats = %+v, %v; want eta nil", st, err)
	}
}

func TestJobAndCancel(t *testing.T) {
	rec, url := newRecorder(t, 200, `{"job_id":"j1","tenant":"acme","type":"email","state":"queued","position":4,"eta_seconds":0.8,
		"attempt":0,"enqueued_at":"2030-01-02T03:04:05Z","updated_at":"2030-01-02T03:04:06Z"}`)
	c := New(url, "k")
	got, err := c.Job(context.Background(), "j1")
	if err != nil {
		t.Fatal(err)
	}
	want := JobStatus{JobID: "j1", Tenant: "acme", Type: "email", State: StateQueued, Position: ptr(int64(4)), ETASeconds: ptr(0.8),
		EnqueuedAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2030, 1, 2, 3, 4, 6, 0, time.UTC)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("job (-want +got):\n%s", diff)
	}
	rec.body = `{"job_id":"j1","state":"cancelled"}`
	got, err = c.Cancel(context.Background(), "j1")
	if err != nil || got.State != StateCancelled {
		t.Errorf("Cancel = %+v, %v; want state cancelled", got, err)
	}
	wantReqs := []seen{
		{Method: "GET", Path: "/v1/jobs/j1", Auth: "Bearer k"},
		{Method: "DELETE", Path: "/v1/jobs/j1", Auth: "Bearer k"},
	}
	if diff := cmp.Diff(wantReqs, rec.got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestCancelConflictIsNotRetried(t *testing.T) {
	rec, url := newRecorder(t, 409, `{"type":"about:blank","title":"Conflict","status":409,"detail":"job j1 is in_flight"}`)
	_, err := New(url, "k").Cancel(context.Background(), "j1")
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != 409 || apiErr.Detail != "job j1 is in_flight" {
		t.Fatalf("err = %v, want *Error 409", err)
	}
	if len(rec.got) != 1 {
		t.Errorf("requests = %d, want 1", len(rec.got))
	}
}

func TestAdminJobNamesTheTenant(t *testing.T) {
	rec, url := newRecorder(t, 200, `{"job_id":"j 1","tenant":"acme","type":"email","state":"done","position":null,"eta_seconds":null,
		"attempt":1,"enqueued_at":null,"updated_at":"2030-01-02T03:04:06Z","last_error":""}`)
	a := NewAdmin(url, "tok")
	js, err := a.Job(context.Background(), "acme", "j 1")
	if err != nil || js.State != StateDone || js.Position != nil || !js.EnqueuedAt.IsZero() {
		t.Fatalf("Job = %+v, %v; want done, no position, zero enqueued_at", js, err)
	}
	rec.body = `{"job_id":"j 1","state":"cancelled"}`
	if _, err := a.Cancel(context.Background(), "", "j 1"); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{Method: "GET", Path: "/v1/jobs/j%201", Auth: "Bearer tok", Query: "tenant=acme"},
		{Method: "DELETE", Path: "/v1/jobs/j%201", Auth: "Bearer tok"},
	}
	if diff := cmp.Diff(want, rec.got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
