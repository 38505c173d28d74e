package ingest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/tenants"
)

// largeSpec is a spec of at least 64 KiB whose API keys and job type
// limits all differ with i.
func largeSpec(t testing.TB, i int) config.Tenant {
	t.Helper()
	spec := config.Tenant{
		Outflow:  config.Outflow{Rate: 5, Capacity: 5},
		Target:   config.Target{URL: "http://127.0.0.1:9/hook"},
		JobTypes: map[string]config.JobType{},
	}
	for j := range 720 {
		spec.APIKeys = append(spec.APIKeys, config.HashKey(fmt.Sprintf("key-%d-%d", i, j)))
	}
	for j := range 100 {
		spec.JobTypes[fmt.Sprintf("type-%03d", j)] = config.JobType{
			Admission: config.Admission{Algorithm: "token_bucket", Limit: int64(1000 + i + j), Period: time.Minute, Burst: 50},
		}
	}
	spec = spec.WithDefaults()
	if b, _ := tenants.EncodeSpec(spec); len(b) < 64<<10 {
		t.Fatalf("largeSpec is %d bytes, want at least 64 KiB", len(b))
	}
	return spec
}

// TestAdminAuditPages fills a tenant's audit to its byte cap with changes
// of 64 KiB specs and pages through GET …/audit: every page is 200 and
// within its byte bound, the cursor returns every entry exactly once,
// newest first, and a bad limit or cursor is a 400 problem naming it that
// writes nothing.
func TestAdminAuditPages(t *testing.T) {
	t.Parallel()
	rdb := privateRedis(t)
	cfg := adminConfig(t, tenantYAML("acme", "    outflow: {rate: 5}\n"))
	ctx := context.Background()
	specs := []config.Tenant{largeSpec(t, 0), largeSpec(t, 1)}
	n := keys.AuditMaxBytes/tenants.AuditEntryMaxBytes + 10
	// The changes are written before the server starts, so its registry
	// syncs once instead of reloading a 64 KiB spec after each of them.
	store, err := tenants.NewStore(tenants.StoreConfig{Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		c := tenants.Change{Tenant: "acme", Expect: int64(i), Op: tenants.OpPut, Spec: specs[(i+1)%2], Old: &specs[i%2],
			Who: "alice", Action: tenants.ActionUpdate, At: time.Now()}
		if _, err := store.Write(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	h := startAdminIngest(t, rdb, cfg, nil)
	stored, err := rdb.LLen(ctx, keys.Audit("acme")).Result()
	if err != nil || stored >= int64(n) {
		t.Fatalf("audit holds %d entries of %d writes (%v); want the byte cap to bind", stored, n, err)
	}
	if ttl := rdb.PTTL(ctx, keys.Audit("acme")).Val(); ttl <= 0 {
		t.Errorf("audit TTL %v, want one", ttl)
	}

	pageBound := tenants.AuditPageMax*(tenants.AuditEntryMaxBytes+1) + 64
	var seen []int64
	path := "/admin/v1/tenants/acme/audit?limit=" + fmt.Sprint(tenants.AuditPageMax)
	for cursor := ""; ; {
		a := h.admin(t, "GET", path+cursor, aliceToken, "")
		if a.status != 200 || len(a.body) > pageBound {
			t.Fatalf("page %q: status %d, %d bytes; want 200 within %d bytes", cursor, a.status, len(a.body), pageBound)
		}
		var page struct {
			Entries []struct {
				Version      int64
				Changes      []json.RawMessage
				ChangesTotal int `json:"changes_total"`
				Truncated    bool
			}
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Entries {
			if !e.Truncated || e.ChangesTotal <= len(e.Changes) || len(e.Changes) == 0 {
				t.Errorf("entry %d: %d of %d changes, truncated %v; want the first ones and the mark", e.Version, len(e.Changes), e.ChangesTotal, e.Truncated)
			}
			seen = append(seen, e.Version)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = "&cursor=" + *page.NextCursor
	}
	var want []int64
	for v := int64(n); v > int64(n)-stored; v-- {
		want = append(want, v)
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("versions over all pages (-want +got):\n%s", diff)
	}

	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"},
		{"limit=101", "limit"},
		{"limit=x", "limit"},
		{"cursor=0", "cursor"},
		{"cursor=-3", "cursor"},
		{"cursor=abc", "cursor"},
		{"limit=5&cursor=1.5", "cursor"},
		{"limit=1&limit=2", "limit"},
		{"cursor=3&cursor=2", "cursor"},
	} {
		a := h.admin(t, "GET", "/admin/v1/tenants/acme/audit?"+c.query, aliceToken, "")
		m := a.json(t)
		if a.status != 400 || m["field"] != c.field || a.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: status %d, %s; want a 400 problem naming %s", c.query, a.status, a.body, c.field)
		}
	}
	if l := rdb.LLen(ctx, keys.Audit("acme")).Val(); l != stored {
		t.Errorf("audit holds %d entries after the bad requests, want %d", l, stored)
	}
	if !strings.Contains(string(h.admin(t, "GET", "/admin/v1/tenants/acme/audit?cursor=1", aliceToken, "").body), `"entries":[]`) {
		t.Error("cursor=1 (below the oldest version): want an empty page")
	}
}
