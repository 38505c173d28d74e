package tenants

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

func TestStoreWrite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"standalone", testenv.Redis(t)}, {"cluster", testenv.Cluster(t)}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t, c.rdb)
			id := tenantName(t, c.rdb)
			ps := c.rdb.Subscribe(ctx, keys.TenantsChannel())
			defer ps.Close()
			if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
				t.Fatal(err)
			}
			v0, err := s.Version(ctx)
			if err != nil {
				t.Fatal(err)
			}

			spec := config.Tenant{Outflow: config.Outflow{Rate: 5, Capacity: 7}}.WithDefaults()
			rec, err := s.Write(ctx, Change{Tenant: id, Op: OpPut, Spec: spec, Who: "alice", Action: ActionCreate, At: testAt})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Version != 1 || rec.Spec == nil {
				t.Fatalf("record = %+v, want version 1 with a spec", rec)
			}
			override := func() map[string]string {
				m, err := c.rdb.HGetAll(ctx, keys.Override(id)).Result()
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			raw, _ := EncodeSpec(spec)
			want := map[string]string{"spec": string(raw), "version": "1", "outflow_rate": "5", "outflow_capacity": "7"}
			if diff := cmp.Diff(want, override()); diff != "" {
				t.Errorf("override hash after put (-want +got):\n%s", diff)
			}
			// The channel is shared: other tests' writes are skipped.
			if got, err := nextMessageOf(ctx, ps, id); err != nil || got != id+" 1" {
				t.Errorf("published %q (%v), want %q", got, err, id+" 1")
			}
			if v, _ := s.Version(ctx); v <= v0 {
				t.Errorf("global version %d after a write, want > %d", v, v0)
			}
			if ok, _ := c.rdb.SIsMember(ctx, keys.Tenants(), id).Result(); !ok {
				t.Errorf("tenant %s not in %s", id, keys.Tenants())
			}

			// A write computed from an old version changes nothing.
			_, err = s.Write(ctx, Change{Tenant: id, Expect: 0, Op: OpTombstone, Who: "bob", Action: ActionDelete, At: testAt})
			if !errors.Is(err, ErrConflict) {
				t.Errorf("stale write: %v, want ErrConflict", err)
			}
			if diff := cmp.Diff(want, override()); diff != "" {
				t.Errorf("override hash after a refused write (-want +got):\n%s", diff)
			}

			// Rate 0 (unlimited) removes the flattened fields.
			unlimited := config.Tenant{}.WithDefaults()
			if _, err := s.Write(ctx, Change{Tenant: id, Expect: 1, Op: OpPut, Spec: unlimited, Old: &spec, Who: "alice", Action: ActionUpdate, At: testAt}); err != nil {
				t.Fatal(err)
			}
			raw, _ = EncodeSpec(unlimited)
			want = map[string]string{"spec": string(raw), "version": "2"}
			if diff := cmp.Diff(want, override()); diff != "" {
				t.Errorf("override hash after rate 0 (-want +got):\n%s", diff)
			}

			if _, err := s.Write(ctx, Change{Tenant: id, Expect: 2, Op: OpTombstone, Old: &unlimited, Who: "bob", Action: ActionDelete, At: testAt}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"version": "3", "deleted": "1"}, override()); diff != "" {
				t.Errorf("override hash after a tombstone (-want +got):\n%s", diff)
			}
			got, err := s.Get(ctx, id)
			if err != nil || !got.Deleted || got.Spec != nil || got.Version != 3 {
				t.Errorf("Get after tombstone = %+v, %v", got, err)
			}
			if !listed(t, s, id) {
				t.Errorf("List misses the tombstone of %s", id)
			}

			if _, err := s.Write(ctx, Change{Tenant: id, Expect: 3, Op: OpClear, Who: "bob", Action: ActionDelete, At: testAt}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]string{"version": "4"}, override()); diff != "" {
				t.Errorf("override hash after clear (-want +got):\n%s", diff)
			}
			if listed(t, s, id) {
				t.Errorf("List has %s after clear", id)
			}

			page, err := s.Audit(ctx, id, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			entries := page.Entries
			var summary []string
			for _, e := range entries {
				summary = append(summary, e.Who+" "+e.Action+" v"+itoa(e.Version)+" "+changesText(e))
			}
			// spec → unlimited drops the outflow rate and capacity; the
			// tombstone lists every field of the old spec as removed.
			wantSummary := []string{
				"bob delete v4 ",
				"bob delete v3 " + changesText(AuditEntry{Changes: mustChanges(t, raw, nil)}),
				"alice update v2 " + changesText(AuditEntry{Changes: mustChanges(t, rawSpec(t, spec), raw)}),
				"alice create v1 " + changesText(AuditEntry{Changes: mustChanges(t, nil, rawSpec(t, spec))}),
			}
			if diff := cmp.Diff(wantSummary, summary); diff != "" {
				t.Errorf("audit, newest first (-want +got):\n%s", diff)
			}
			if got := summary[2]; !strings.Contains(got, "outflow.rate: 5 → -") || !strings.Contains(got, "outflow.unlimited: - → true") {
				t.Errorf("update entry %q does not show outflow.rate: 5 → - and outflow.unlimited: - → true", got)
			}
			if page.Next != 0 {
				t.Errorf("next cursor %d after the only page, want 0", page.Next)
			}
			if !entries[0].At.Equal(testAt) {
				t.Errorf("audit at = %v, want %v", entries[0].At, testAt)
			}
		})
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func listed(t *testing.T, s *Store, id string) bool {
	t.Helper()
	recs, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Tenant == id {
			return true
		}
	}
	return false
}

// TestStoreAuditCapped writes past the cap and checks that the newest
// keys.AuditMaxEntries entries are kept.
func TestStoreAuditCapped(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	s := newStore(t, rdb)
	id := tenantName(t, rdb)
	spec := config.Tenant{}.WithDefaults()
	n := keys.AuditMaxEntries + 3
	for i := range n {
		if _, err := s.Write(ctx, Change{Tenant: id, Expect: int64(i), Op: OpPut, Spec: spec, Who: "alice", Action: ActionUpdate, At: testAt}); err != nil {
			t.Fatal(err)
		}
	}
	if l, _ := rdb.LLen(ctx, keys.Audit(id)).Result(); l != keys.AuditMaxEntries {
		t.Errorf("audit length %d, want %d", l, keys.AuditMaxEntries)
	}
	page, err := s.Audit(ctx, id, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	entries := page.Entries
	if len(entries) != 2 || entries[0].Version != int64(n) || entries[1].Version != int64(n-1) {
		t.Errorf("newest entries = %+v, want versions %d and %d", entries, n, n-1)
	}
}

func TestStoreRefusesBadInput(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	ctx := context.Background()
	s := newStore(t, rdb)
	if _, err := s.Write(ctx, Change{Tenant: "a{b}", Op: OpPut}); err == nil {
		t.Error("Write with an invalid tenant id: nil error")
	}
	if _, err := s.Write(ctx, Change{Tenant: tenantName(t, rdb), Op: 0}); err == nil {
		t.Error("Write without an op: nil error")
	}
	if _, err := s.Get(ctx, "a b"); err == nil {
		t.Error("Get with an invalid tenant id: nil error")
	}
	// A stored spec that no longer decodes is an error naming the tenant,
	// not a silently empty tenant.
	id := tenantName(t, rdb)
	rdb.HSet(ctx, keys.Override(id), "spec", `{"outflow":{"rate":"x"}}`, "version", 1)
	rdb.PExpire(ctx, keys.Override(id), time.Minute)
	if _, err := s.Get(ctx, id); err == nil {
		t.Error("Get of a broken stored spec: nil error")
	}
}

// nextMessageOf returns the payload of the next message on ps about tenant
// id, skipping those of other tenants, waiting at most 5 s.
func nextMessageOf(ctx context.Context, ps *redis.PubSub, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(msg.Payload, id+" ") {
			return msg.Payload, nil
		}
	}
}
