package queue_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice/queue"
)

// TestEncodeIsMarshals: Encode writes json.Marshal's bytes for every
// envelope, the plain ones it writes by hand and those it leaves to
// Marshal (a payload with whitespace or characters Marshal escapes, names
// that need escaping, a time in a zone), and refuses what Marshal refuses.
func TestEncodeIsMarshals(t *testing.T) {
	at := time.Date(2026, 12, 7, 3, 4, 5, 123456789, time.UTC)
	later := at.Add(time.Hour)
	zoned := at.In(time.FixedZone("x", 2*3600))
	base := queue.Envelope{Version: queue.EnvelopeVersion, ID: "019af0c3d2e14b6f8a9c0d1e2f3a4b5c", Tenant: "acme",
		Type: "email", Payload: json.RawMessage(`{"to":"ada@example.com","template":"welcome"}`), Cost: 1, EnqueuedAt: at}
	cases := map[string]func(e *queue.Envelope){
		"plain": func(*queue.Envelope) {},
		"every field": func(e *queue.Envelope) {
			e.Deadline, e.NotBefore, e.HeartbeatMS, e.Attempt, e.Cost = &later, &later, 30000, 3, 1<<40
		},
		"no payload":      func(e *queue.Envelope) { e.Payload = nil },
		"spaced payload":  func(e *queue.Envelope) { e.Payload = json.RawMessage("{ \"a\" : [1, 2] }\n") },
		"html payload":    func(e *queue.Envelope) { e.Payload = json.RawMessage(`{"h":"<b>&</b>"}`) },
		"u2028 payload":   func(e *queue.Envelope) { e.Payload = json.RawMessage("\"\u2028\"") },
		"string payload":  func(e *queue.Envelope) { e.Payload = json.RawMessage(`"a \" b"`) },
		"escaped id":      func(e *queue.Envelope) { e.ID = `a"b<c>` },
		"unicode type":    func(e *queue.Envelope) { e.Type = "é" },
		"zoned time":      func(e *queue.Envelope) { e.EnqueuedAt, e.Deadline = zoned, &zoned },
		"zero version":    func(e *queue.Envelope) { e.Version = 0 },
		"negative values": func(e *queue.Envelope) { e.Cost, e.Attempt, e.HeartbeatMS = -1, -2, -3 },
		"invalid payload": func(e *queue.Envelope) { e.Payload = json.RawMessage(`{"a":`) },
		"year 10000":      func(e *queue.Envelope) { e.EnqueuedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	}
	for name, change := range cases {
		e := base
		change(&e)
		want, wantErr := json.Marshal(&e)
		got, err := e.Encode()
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, json.Marshal's %v", name, err, wantErr)
			continue
		}
		if err == nil && !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
		if err == nil {
			back, derr := queue.Decode(got)
			if derr == nil && (back.ID != e.ID || back.Cost != e.Cost || !back.EnqueuedAt.Equal(e.EnqueuedAt)) {
				t.Errorf("%s: decoded %+v from %s", name, back, got)
			}
		}
	}
}

// TestEncodeAllocatesOnce: a plain envelope costs one allocation, its
// bytes.
func TestEncodeAllocatesOnce(t *testing.T) {
	at := time.Now().UTC()
	e := queue.Envelope{Version: queue.EnvelopeVersion, ID: "019af0c3d2e14b6f8a9c0d1e2f3a4b5c", Tenant: "acme",
		Type: "email", Payload: json.RawMessage(`{"to":"ada@example.com"}`), Cost: 1, EnqueuedAt: at, Deadline: &at}
	if n := testing.AllocsPerRun(100, func() { _, _ = e.Encode() }); n != 1 {
		t.Fatalf("Encode allocated %v times, want 1", n)
	}
}
