package tenants

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
)

// BenchmarkPropagation measures one admin change from the write (Patch on
// one registry) until another registry on the same Redis has applied it —
// what an ingest or drainer instance waits to enforce a change. It reports
// the mean and the worst latency in ms; the requirement is < 1000 ms.
func BenchmarkPropagation(b *testing.B) {
	_, rdb := privateRedis(b)
	ctx := context.Background()
	base := baseConfig(b, fileTenant("a", 5))
	admin, _ := startRegistry(b, rdb, base, RegistryOptions{})
	_, seen := startRegistry(b, rdb, base, RegistryOptions{})
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
