package depth

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
)

// TestSampleRecordsHistory: a sample sets the gauge and writes the slot of
// Redis TIME with the backlog and the outflow of the last 5 complete
// seconds; a new slot trims fields older than the span; the hash has a TTL;
// ReadHistory returns the slots within the span, oldest first. A tenant with
// no state gets no history key; one with a history but no counter (it was
// deleted: the counter lives a week, the history 16 minutes) gets no new point,
// as the sampler reads no tenant without a counter. On a single Redis and on the cluster (several tenants, several
// slots, one round trip).
func TestSampleRecordsHistory(t *testing.T) {
	t.Parallel()
	for name, rdb := range map[string]redis.UniversalClient{"redis": testenv.Redis(t), "cluster": testenv.Cluster(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, b, c := testenv.Name(t, "hist-a"), testenv.Name(t, "hist-b"), testenv.Name(t, "hist-c")
			t.Cleanup(func() {
				for _, tn := range []string{a, b, c} {
					rdb.Del(ctx, keys.Backlog(tn), keys.Outflow(tn), keys.History(tn))
				}
			})
			sec := redisSecond(t, rdb)
			slot := sec - sec%5
			stale := slot - int64(keys.HistorySpan/time.Second) - 5
			rdb.Set(ctx, keys.Backlog(a), 42, time.Minute)
			// 3 + 7 units in the 5 seconds before now; the current second's 100
			// is not counted.
			rdb.HSet(ctx, keys.Outflow(a), strconv.FormatInt(sec-1, 10), 3, strconv.FormatInt(sec-4, 10), 7, strconv.FormatInt(sec, 10), 100)
			rdb.HSet(ctx, keys.History(a), strconv.FormatInt(stale, 10), "9 9", strconv.FormatInt(slot-60, 10), "5 1.5")
			rdb.HSet(ctx, keys.History(c), strconv.FormatInt(slot-60, 10), "3 1")
			rdb.Expire(ctx, keys.History(c), time.Minute)

			g := NewGauge("test")
			s := Sampler{Redis: rdb, Gauge: g}
			if failed := s.Sample(ctx, []string{a, b, c}); failed != 0 {
				t.Fatalf("Sample failed %d reads", failed)
			}
			if v := gaugeValue(t, g, a); v != 42 {
				t.Errorf("gauge of %s = %v, want 42", a, v)
			}
			if v := gaugeValue(t, g, b); v != 0 {
				t.Errorf("gauge of %s (no counter) = %v, want 0", b, v)
			}
			if redisSecond(t, rdb) != sec {
				t.Skip("the sample ran in a later second; the expected outflow is not known")
			}
			got, err := ReadHistory(ctx, rdb, a)
			if err != nil {
				t.Fatal(err)
			}
			want := []Point{{T: slot - 60, Backlog: 5, Outflow: 1.5}, {T: slot, Backlog: 42, Outflow: 2}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("history of %s (-want +got):\n%s", a, diff)
			}
			if n := rdb.HLen(ctx, keys.History(a)).Val(); n != 2 {
				t.Errorf("history hash has %d fields, want 2 (the stale one trimmed)", n)
			}
			if ttl := rdb.TTL(ctx, keys.History(a)).Val(); ttl <= 0 || ttl > keys.HistoryTTL {
				t.Errorf("history TTL = %v, want in (0, %v]", ttl, keys.HistoryTTL)
			}
			if n := rdb.Exists(ctx, keys.History(b)).Val(); n != 0 {
				t.Errorf("a tenant with no state got a history key")
			}
			gotC, err := ReadHistory(ctx, rdb, c)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]Point{{T: slot - 60, Backlog: 3, Outflow: 1}}, gotC); diff != "" {
				t.Errorf("history of %s (-want +got):\n%s", c, diff)
			}
		})
	}
}

// TestSampleSameSlotOverwrites: a second sample of the same slot (another
// instance) overwrites it, leaving one point.
func TestSampleSameSlotOverwrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	tn := testenv.Name(t, "hist-same")
	t.Cleanup(func() { rdb.Del(ctx, keys.Backlog(tn), keys.History(tn)) })
	s1 := Sampler{Redis: rdb, Gauge: NewGauge("one")}
	s2 := Sampler{Redis: rdb, Gauge: NewGauge("two")}
	for {
		sec := redisSecond(t, rdb)
		rdb.Set(ctx, keys.Backlog(tn), 1, time.Minute)
		s1.Sample(ctx, []string{tn})
		rdb.Set(ctx, keys.Backlog(tn), 2, time.Minute)
		s2.Sample(ctx, []string{tn})
		if redisSecond(t, rdb)/5 != sec/5 {
			rdb.Del(ctx, keys.History(tn))
			continue // crossed a slot boundary: try again
		}
		break
	}
	got, err := ReadHistory(ctx, rdb, tn)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Backlog != 2 {
		t.Errorf("history = %+v, want one point of backlog 2 (the later sample)", got)
	}
}

// TestHistoryPoints: fields outside the span or malformed are skipped; the
// rest sorted oldest first, negative figures read as 0.
func TestHistoryPoints(t *testing.T) {
	now := int64(10_000)
	span := int64(keys.HistorySpan / time.Second)
	got := historyPoints(map[string]string{
		"9995":                            "3 1.5",
		"9990":                            "-4 -1",
		strconv.FormatInt(now-span, 10):   "1 1",
		strconv.FormatInt(now-span-5, 10): "7 7",
		"10005":                           "8 8",
		"x":                               "1 1",
		"9985":                            "1",
		"9980":                            "NaN 1",
		"9975":                            "1 +Inf",
	}, now)
	want := []Point{{T: now - span, Backlog: 1, Outflow: 1}, {T: 9990}, {T: 9995, Backlog: 3, Outflow: 1.5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("historyPoints (-want +got):\n%s", diff)
	}
}

func redisSecond(t *testing.T, rdb redis.UniversalClient) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now.Unix()
}

func gaugeValue(t *testing.T, g *prometheus.GaugeVec, tenant string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(g)
	return testenv.MetricValue(t, reg, "sluice_queue_depth", map[string]string{"tenant": tenant})
}
