package queue

import (
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	deadline := at.Add(time.Hour)
	tests := []struct {
		name string
		env  Envelope
	}{
		{"minimal", Envelope{Version: 1, ID: "j1", Tenant: "acme", Cost: 1, EnqueuedAt: at}},
		{"full", Envelope{
			Version: 1, ID: "j2", Tenant: "acme.eu-1", Type: "email",
			Payload: json.RawMessage(`{"to":"a@example.com","n":[1,2]}`),
			Cost:    5, Attempt: 3, EnqueuedAt: at, Deadline: &deadline,
		}},
		{"payload is a string", Envelope{Version: 1, ID: "j3", Tenant: "t", Payload: json.RawMessage(`"hello"`), Cost: 1, EnqueuedAt: at}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.env.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			got, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode(%s): %v", b, err)
			}
			if diff := cmp.Diff(tt.env, got); diff != "" {
				t.Errorf("Decode(Encode(e)) mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEnvelopeFieldNames pins the JSON field names, the wire format other
// services and stored jobs depend on.
func TestEnvelopeFieldNames(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := Envelope{Version: 1, ID: "j", Tenant: "t", Type: "x", Payload: json.RawMessage(`{}`), Cost: 1, Attempt: 0, EnqueuedAt: at, Deadline: &at}
	b, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	want := []string{"attempt", "cost", "deadline", "enqueued_at", "id", "payload", "tenant", "type", "v"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON fields (-want +got):\n%s", diff)
	}
	if m["enqueued_at"] != "2026-03-01T12:00:00Z" {
		t.Errorf("enqueued_at = %v, want RFC 3339 2026-03-01T12:00:00Z", m["enqueued_at"])
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantIs  error
		wantSub string
	}{
		{"not json", `{"v":1,`, nil, "decode envelope"},
		{"unknown version", `{"v":2,"id":"j","tenant":"t"}`, ErrUnknownVersion, "2"},
		{"no version", `{"id":"j","tenant":"t"}`, ErrUnknownVersion, "0"},
		{"no id", `{"v":1,"tenant":"t"}`, nil, "missing id or tenant"},
		{"no tenant", `{"v":1,"id":"j"}`, nil, "missing id or tenant"},
		{"wrong type", `{"v":1,"id":"j","tenant":"t","cost":"one"}`, nil, "decode envelope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.in))
			if err == nil {
				t.Fatalf("Decode(%s) = nil error, want one containing %q", tt.in, tt.wantSub)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("Decode(%s) = %v, want errors.Is %v", tt.in, err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("Decode(%s) = %q, want it to contain %q", tt.in, err, tt.wantSub)
			}
		})
	}
}

func TestPrepareJobs(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	earlier := now.Add(-time.Minute)
	jobs := []Envelope{
		{ID: "a1", Tenant: "a", Cost: 2},
		{ID: "b1", Tenant: "b", Cost: 1, EnqueuedAt: earlier},
		{ID: "a2", Tenant: "a", Cost: 3, Version: EnvelopeVersion},
	}
	batches, err := prepareJobs(jobs, now)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Tenant string
		Cost   int64
		IDs    []string
		Times  []time.Time
	}
	var got []summary
	for _, b := range batches {
		s := summary{Tenant: b.tenant, Cost: b.cost}
		for i, e := range b.jobs {
			s.IDs = append(s.IDs, e.ID)
			d, err := Decode(b.values[i])
			if err != nil {
				t.Fatalf("encoded job %s does not decode: %v", e.ID, err)
			}
			s.Times = append(s.Times, d.EnqueuedAt)
		}
		got = append(got, s)
	}
	want := []summary{
		{Tenant: "a", Cost: 5, IDs: []string{"a1", "a2"}, Times: []time.Time{now, now}},
		{Tenant: "b", Cost: 1, IDs: []string{"b1"}, Times: []time.Time{earlier}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prepareJobs (-want +got):\n%s", diff)
	}
	if jobs[0].Version != 0 || !jobs[0].EnqueuedAt.IsZero() {
		t.Errorf("prepareJobs modified the caller's job: %+v", jobs[0])
	}
}

func TestPrepareJobsInvalid(t *testing.T) {
	tests := []struct {
		name string
		job  Envelope
	}{
		{"empty tenant", Envelope{ID: "j", Cost: 1}},
		{"tenant with a brace", Envelope{ID: "j", Tenant: "a}b", Cost: 1}},
		{"tenant too long", Envelope{ID: "j", Tenant: strings.Repeat("t", 65), Cost: 1}},
		{"no id", Envelope{Tenant: "t", Cost: 1}},
		{"cost 0", Envelope{ID: "j", Tenant: "t"}},
		{"negative cost", Envelope{ID: "j", Tenant: "t", Cost: -1}},
		{"other version", Envelope{ID: "j", Tenant: "t", Cost: 1, Version: 7}},
		{"payload not json", Envelope{ID: "j", Tenant: "t", Cost: 1, Payload: json.RawMessage(`{`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := Envelope{ID: "ok", Tenant: "t", Cost: 1}
			_, err := prepareJobs([]Envelope{ok, tt.job}, time.Now())
			if !errors.Is(err, ErrInvalidJob) {
				t.Errorf("prepareJobs(%+v) = %v, want an error wrapping ErrInvalidJob", tt.job, err)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("prepareJobs(%+v) = %v, must not wrap ErrUnavailable", tt.job, err)
			}
		})
	}
}
