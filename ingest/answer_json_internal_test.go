package ingest

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestJobAnswerJSONIsMarshals: the hand-written 202 body is byte for byte
// what json.Marshal makes of the same answer, for plain answers and for
// those it hands to json.Marshal (strings that need escaping, times
// MarshalJSON refuses or writes with a zone).
func TestJobAnswerJSONIsMarshals(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 4, 5, 123456789, time.UTC)
	due := now.Add(90 * time.Minute)
	whole := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	zoned := now.In(time.FixedZone("x", 5*3600+30*60))
	oddZone := now.In(time.FixedZone("y", -(3*3600 + 17)))
	farZone := now.In(time.FixedZone("z", 25*3600))
	cases := []jobAnswer{
		{JobID: "019af0c3d2e14b6f8a9c0d1e2f3a4b5c", Tenant: "acme", EnqueuedAt: now},
		{JobID: "order:17.a-b_c", Tenant: "ac.me-1_x", EnqueuedAt: whole, DueAt: &due},
		{JobID: "x", Tenant: "t", EnqueuedAt: zoned, DueAt: &zoned},
		{JobID: "x", Tenant: "t", EnqueuedAt: oddZone},
		{JobID: `a"b\c<d>e&f`, Tenant: "t", EnqueuedAt: now},
		{JobID: "é\u2028\x01", Tenant: "t", EnqueuedAt: now},
		{JobID: "", Tenant: "", EnqueuedAt: time.Time{}},
		{JobID: "x", Tenant: "t", EnqueuedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{JobID: "x", Tenant: "t", EnqueuedAt: now, DueAt: &farZone},
	}
	for _, a := range cases {
		want, wantErr := json.Marshal(a)
		got, err := a.appendJSON([]byte("prefix"))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%+v: error %v, json.Marshal's %v", a, err, wantErr)
		}
		if err != nil {
			continue
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("%+v:\n got %s\nwant prefix%s", a, got, want)
		}
	}
}

// TestJobAnswerJSONAllocatesOnce: a plain answer costs no allocation
// beyond the buffer it is given room in.
func TestJobAnswerJSONAllocatesOnce(t *testing.T) {
	now := time.Now().UTC()
	a := jobAnswer{JobID: "019af0c3d2e14b6f8a9c0d1e2f3a4b5c", Tenant: "acme", EnqueuedAt: now, DueAt: &now}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { _, _ = a.appendJSON(buf[:0]) }); n != 0 {
		t.Fatalf("appendJSON allocated %v times per answer, want 0", n)
	}
}
