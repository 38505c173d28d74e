package batch

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/queue"
)

func TestPrepareJobs(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	earlier := now.Add(-time.Minute)
	jobs := []queue.Envelope{
		{ID: "a1", Tenant: "a", Cost: 2},
		{ID: "b1", Tenant: "b", Cost: 1, EnqueuedAt: earlier},
		{ID: "a2", Tenant: "a", Cost: 3, Version: queue.EnvelopeVersion},
	}
	batches, err := Prepare(jobs, now)
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
		s := summary{Tenant: b.Tenant, Cost: b.Cost}
		for i, e := range b.Jobs {
			s.IDs = append(s.IDs, e.ID)
			d, err := queue.Decode(b.Values[i])
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
		t.Errorf("Prepare (-want +got):\n%s", diff)
	}
	if jobs[0].Version != 0 || !jobs[0].EnqueuedAt.IsZero() {
		t.Errorf("Prepare modified the caller's job: %+v", jobs[0])
	}
}

func TestPrepareJobsInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		job  queue.Envelope
	}{
		{"empty tenant", queue.Envelope{ID: "j", Cost: 1}},
		{"tenant with a brace", queue.Envelope{ID: "j", Tenant: "a}b", Cost: 1}},
		{"tenant too long", queue.Envelope{ID: "j", Tenant: strings.Repeat("t", 65), Cost: 1}},
		{"no id", queue.Envelope{Tenant: "t", Cost: 1}},
		{"cost 0", queue.Envelope{ID: "j", Tenant: "t"}},
		{"negative cost", queue.Envelope{ID: "j", Tenant: "t", Cost: -1}},
		{"other version", queue.Envelope{ID: "j", Tenant: "t", Cost: 1, Version: 7}},
		{"payload not json", queue.Envelope{ID: "j", Tenant: "t", Cost: 1, Payload: json.RawMessage(`{`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok := queue.Envelope{ID: "ok", Tenant: "t", Cost: 1}
			_, err := Prepare([]queue.Envelope{ok, tt.job}, time.Now())
			if !errors.Is(err, queue.ErrInvalidJob) {
				t.Errorf("Prepare(%+v) = %v, want an error wrapping queue.ErrInvalidJob", tt.job, err)
			}
			if errors.Is(err, queue.ErrUnavailable) {
				t.Errorf("Prepare(%+v) = %v, must not wrap queue.ErrUnavailable", tt.job, err)
			}
		})
	}
}
