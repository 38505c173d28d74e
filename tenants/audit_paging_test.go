package tenants

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// fillAudit writes n changes of 64 KiB specs to tenant id and returns the
// versions written, newest first.
func fillAudit(t testing.TB, s *Store, id string, n int) {
	t.Helper()
	ctx := context.Background()
	specs := []config.Tenant{bigSpec(0), bigSpec(1)}
	if b := rawSpec(t, specs[0]); len(b) < 64<<10 {
		t.Fatalf("bigSpec is %d bytes, want at least 64 KiB", len(b))
	}
	for i := range n {
		c := Change{Tenant: id, Expect: int64(i), Op: OpPut, Spec: specs[(i+1)%2], Who: "alice", Action: ActionUpdate, At: testAt}
		if i > 0 {
			c.Old = &specs[i%2]
		} else {
			c.Action = ActionCreate
		}
		if _, err := s.Write(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
}

// auditBytes is the sum of the lengths of tenant id's stored entries.
func auditBytes(t testing.TB, rdb redis.UniversalClient, id string) (entries, bytes int) {
	t.Helper()
	vals, err := rdb.LRange(context.Background(), keys.Audit(id), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		bytes += len(v)
	}
	return len(vals), bytes
}

// readAll pages through tenant id's audit with limit and returns every
// version seen, in order, checking each page's JSON size.
func readAll(t testing.TB, s *Store, id string, limit int) []int64 {
	t.Helper()
	var seen []int64
	var before int64
	for pages := 0; ; pages++ {
		if pages > keys.AuditMaxEntries+1 {
			t.Fatalf("more than %d pages: the cursor does not move (at %d)", pages, before)
		}
		page, err := s.Audit(context.Background(), id, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(page.Entries)
		if len(page.Entries) > limit || len(b) > limit*(AuditEntryMaxBytes+1)+1 {
			t.Errorf("page after %d: %d entries, %d bytes; want at most %d entries of %d bytes", before, len(page.Entries), len(b), limit, AuditEntryMaxBytes)
		}
		for _, e := range page.Entries {
			seen = append(seen, e.Version)
		}
		if page.Next == 0 {
			return seen
		}
		if before != 0 && page.Next >= before {
			t.Fatalf("next cursor %d after %d: not older", page.Next, before)
		}
		before = page.Next
	}
}

// countdown is from, from-1, …, to.
func countdown(from, to int64) []int64 {
	var out []int64
	for v := from; v >= to; v-- {
		out = append(out, v)
	}
	return out
}

// TestAuditCapsAndPaging fills a tenant's audit past its byte cap with
// changes of 64 KiB specs: the list stays within keys.AuditMaxBytes (and
// has a TTL, checked by tenantName), every page is within its bound, and
// paging returns every stored entry exactly once, newest first.
func TestAuditCapsAndPaging(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	s := newStore(t, rdb)
	id := tenantName(t, rdb)
	n := keys.AuditMaxBytes/AuditEntryMaxBytes + 10
	fillAudit(t, s, id, n)
	count, size := auditBytes(t, rdb, id)
	if size > keys.AuditMaxBytes || size < keys.AuditMaxBytes-AuditEntryMaxBytes || count >= n {
		t.Fatalf("audit holds %d entries of %d writes in %d bytes; want the byte cap %d reached, not passed",
			count, n, size, keys.AuditMaxBytes)
	}
	want := countdown(int64(n), int64(n-count+1))
	for _, limit := range []int{AuditPageMax, 7, 1} {
		if diff := cmp.Diff(want, readAll(t, s, id, limit)); diff != "" {
			t.Errorf("versions paging by %d (-want +got):\n%s", limit, diff)
		}
	}
}

// TestAuditPagingUnderAppends reads the first page, appends more changes,
// and follows the cursor: the rest of the entries come exactly once, none
// of the new ones, none twice.
func TestAuditPagingUnderAppends(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		rdb  redis.UniversalClient
	}{{"standalone", testenv.Redis(t)}, {"cluster", testenv.Cluster(t)}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s := newStore(t, c.rdb)
			id := tenantName(t, c.rdb)
			spec := config.Tenant{Outflow: config.Outflow{Rate: 5}}.WithDefaults()
			write := func(from, to int) {
				for i := from; i < to; i++ {
					if _, err := s.Write(ctx, Change{Tenant: id, Expect: int64(i), Op: OpPut, Spec: spec, Who: "alice", Action: ActionUpdate, At: testAt}); err != nil {
						t.Fatal(err)
					}
				}
			}
			write(0, 10)
			first, err := s.Audit(ctx, id, 0, 4)
			if err != nil {
				t.Fatal(err)
			}
			write(10, 25)
			got := []int64{}
			for _, e := range first.Entries {
				got = append(got, e.Version)
			}
			for before := first.Next; before != 0; {
				p, err := s.Audit(ctx, id, before, 4)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range p.Entries {
					got = append(got, e.Version)
				}
				before = p.Next
			}
			if diff := cmp.Diff(countdown(10, 1), got); diff != "" {
				t.Errorf("versions (-want +got):\n%s", diff)
			}
		})
	}
}
