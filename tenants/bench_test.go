package tenants

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// BenchmarkPropagation measures one admin change from the write (Patch on
// one registry) until another registry on the same Redis has applied it —
// what an ingest or drainer instance waits to enforce a change. It reports
// the mean and the worst latency in ms; the requirement is < 1000 ms.
func BenchmarkPropagation(b *testing.B) {
	_, rdb := privateRedis(b)
	ctx := context.Background()
	base := baseConfig(b, fileTenant("a", 5))
	admin, _ := startRegistry(b, rdb, base, RegistryConfig{})
	_, seen := startRegistry(b, rdb, base, RegistryConfig{})
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		rate := float64(i%1000 + 1)
		start := time.Now()
		if _, err := admin.Patch(ctx, "a", []byte(`{"outflow":{"rate":`+strconv.Itoa(int(rate))+`}}`), "bench", start); err != nil {
			b.Fatal(err)
		}
		at := seen.waitFor(b, propagationBound, "change", func(c *config.Config) bool { return rateOf(c, "a") == rate })
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	b.ReportMetric(float64(sum.Microseconds())/float64(len(lat))/1000, "ms/change")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkAuditPage reads one page of AuditPageMax entries from a tenant
// whose audit is at its byte cap with changes of 64 KiB specs: the newest
// page and one from the middle of the list (a cursor), each one round
// trip. The requirement is well under a second a page.
func BenchmarkAuditPage(b *testing.B) {
	rdb := testenv.Redis(b)
	s := newStore(b, rdb)
	id := tenantName(b, rdb)
	fillAudit(b, s, id, keys.AuditMaxBytes/AuditEntryMaxBytes+10)
	count, size := auditBytes(b, rdb, id)
	ctx := context.Background()
	newest, err := s.Audit(ctx, id, 0, AuditPageMax)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		before int64
	}{{"newest", 0}, {"cursor", newest.Next}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var bytes int
			for b.Loop() {
				p, err := s.Audit(ctx, id, bc.before, AuditPageMax)
				if err != nil || len(p.Entries) != AuditPageMax {
					b.Fatalf("page: %d entries, %v", len(p.Entries), err)
				}
				enc, _ := json.Marshal(p.Entries)
				bytes = len(enc)
			}
			b.ReportMetric(float64(bytes), "page-bytes")
			b.ReportMetric(float64(count), "stored-entries")
			b.ReportMetric(float64(size), "stored-bytes")
		})
	}
}

// BenchmarkAuditWrite is one Store.Write of a change between two 64 KiB
// specs on an audit at its byte cap: the diff, the entry and the script's
// trim walk.
func BenchmarkAuditWrite(b *testing.B) {
	rdb := testenv.Redis(b)
	s := newStore(b, rdb)
	id := tenantName(b, rdb)
	n := keys.AuditMaxBytes/AuditEntryMaxBytes + 60
	fillAudit(b, s, id, n)
	specs := []config.Tenant{bigSpec(0), bigSpec(1)}
	ctx := context.Background()
	b.ReportAllocs()
	i := n
	for b.Loop() {
		c := Change{Tenant: id, Expect: int64(i), Op: OpPut, Spec: specs[(i+1)%2], Old: &specs[i%2], Who: "alice", Action: ActionUpdate, At: testAt}
		if _, err := s.Write(ctx, c); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
