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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
