package queue

import (
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestHeartbeatLapsed: at fixed instants, a heartbeat job lapses when more
// than its interval passed since its last beat, the latest of BeatAt,
// EnqueuedAt and NotBefore; an ordinary job, or a claim that read no time,
// never lapses.
func TestHeartbeatLapsed(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	due := at(100)
	tests := []struct {
		name      string
		hbMS      int64
		enqueued  time.Time
		notBefore *time.Time
		beat, now time.Time
		want      bool
	}{
		{"ordinary job", 0, at(0), nil, time.Time{}, at(1000), false},
		{"no time read", 1000, at(0), nil, time.Time{}, time.Time{}, false},
		{"within the interval of its enqueue", 30_000, at(0), nil, time.Time{}, at(30), false},
		{"past the interval of its enqueue", 30_000, at(0), nil, time.Time{}, at(31), true},
		{"polled since", 30_000, at(0), nil, at(20), at(45), false},
		{"polled, then lapsed", 30_000, at(0), nil, at(20), at(51), true},
		{"scheduled: counts from its due time", 30_000, at(0), &due, time.Time{}, at(120), false},
		{"scheduled: lapsed after its due time", 30_000, at(0), &due, at(50), at(131), true},
	}
	for _, tt := range tests {
		c := &Claimed{Envelope: Envelope{HeartbeatMS: tt.hbMS, EnqueuedAt: tt.enqueued, NotBefore: tt.notBefore}, BeatAt: tt.beat, Now: tt.now}
		if got := c.HeartbeatLapsed(); got != tt.want {
			t.Errorf("%s: HeartbeatLapsed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestEnvelopeScheduleFields pins the JSON names of the scheduled and
// heartbeat fields, left out when unset.
func TestEnvelopeScheduleFields(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	e := Envelope{Version: 1, ID: "j", Tenant: "t", Type: "x", Cost: 1, EnqueuedAt: at, NotBefore: &at, HeartbeatMS: 30_000}
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
	want := []string{"attempt", "cost", "enqueued_at", "heartbeat_ms", "id", "not_before", "tenant", "type", "v"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON fields (-want +got):\n%s", diff)
	}
	if d, _ := Decode(b); d.Heartbeat() != 30*time.Second || !d.NotBefore.Equal(at) {
		t.Errorf("decoded heartbeat %v, not_before %v; want 30s, %v", d.Heartbeat(), d.NotBefore, at)
	}
}

// TestOutcomeReason: a dropped job's Reason is the reason State returns;
// a dead letter's reason wins over it.
func TestOutcomeReason(t *testing.T) {
	t.Parallel()
	if s, e, r := (Outcome{Dropped: "expired", Reason: ReasonHeartbeat}).State(); s != "expired" || e != "" || r != ReasonHeartbeat {
		t.Errorf("dropped heartbeat: State = %q, %q, %q; want expired, \"\", heartbeat", s, e, r)
	}
	if s, _, r := (Outcome{Dropped: "expired", Reason: ReasonHeartbeat, Dead: &DeadLetter{Reason: "poison"}}).State(); s != "dead" || r != "poison" {
		t.Errorf("dead with a drop reason: State = %q, reason %q; want dead, poison", s, r)
	}
}
