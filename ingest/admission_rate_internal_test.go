package ingest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// TestAdmissionCountsTake: concurrent adds are all counted, take returns
// them once (a tenant without decisions is left out) and starts at zero.
func TestAdmissionCountsTake(t *testing.T) {
	a := newAdmissionCounts()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 1000 {
				a.add("acme", 2, i%2 == 0)
			}
		})
	}
	wg.Wait()
	a.add("globex", 1, true)
	if got := a.take(); got["acme"] != [2]int64{8000, 8000} || got["globex"] != [2]int64{1, 0} || len(got) != 2 {
		t.Errorf("take = %v, want acme 8000 admitted and 8000 refused, globex 1 admitted", got)
	}
	if got := a.take(); len(got) != 0 {
		t.Errorf("second take = %v, want nothing", got)
	}
}

// TestAdmissionRateScripts runs admission_rate_add.lua and _read.lua on a
// private Redis: the counts land in the Redis TIME second of the write
// with the TTL; once that second is complete the read sums it; a hash
// grown past 4 × the kept seconds loses its fields older than them; and
// the twins refuse malformed replies.
func TestAdmissionRateScripts(t *testing.T) {
	t.Parallel()
	proc := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	key := keys.AdmissionRate("acme")

	// Old fields, as left by instances long ago: 200 of them, past the trim.
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	old := map[string]any{}
	for i := range 100 {
		s := strconv.FormatInt(now.Unix()-1000-int64(i), 10)
		old[s+":admitted"], old[s+":refused"] = 1, 1
	}
	rdb.HSet(ctx, key, old)
	if err := flushAdmissions(ctx, rdb, map[string][2]int64{"acme": {7, 3}}); err != nil {
		t.Fatal(err)
	}
	fields, _ := rdb.HKeys(ctx, key).Result()
	if len(fields) != 2 || !strings.HasPrefix(fields[0], strings.Split(fields[1], ":")[0]+":") {
		t.Errorf("fields after the flush: %v, want the new second's admitted and refused only (old ones trimmed)", fields)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > keys.AdmissionRateTTL {
		t.Errorf("PTTL %v, want (0, %v]", ttl, keys.AdmissionRateTTL)
	}
	read := func() admissionAnswer {
		v, err := admissionReadCall("acme").Run(ctx, rdb).Result()
		if err != nil {
			t.Fatal(err)
		}
		a, err := parseAdmissionRead(v)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	testenv.WaitFor(t, 3*time.Second, "the written second complete and summed", func() bool {
		return read() == admissionAnswer{AdmittedRate: 0.7, RefusedRate: 0.3}
	})

	if _, err := admissionAddCall("acme", -1, 0).Run(ctx, rdb).Result(); err == nil || !strings.Contains(err.Error(), "counts must be integers >= 0") {
		t.Errorf("a negative count: %v, want the script's refusal", err)
	}
	for _, bad := range []any{[]any{int64(1)}, []any{int64(1), int64(-2)}, []any{"1", "2"}, "OK", nil} {
		if _, err := parseAdmissionRead(bad); !errors.Is(err, lua.ErrReply) {
			t.Errorf("parseAdmissionRead(%v) = %v, want an error wrapping lua.ErrReply", bad, err)
		}
	}
	if err := flushAdmissions(ctx, rdb, nil); err != nil {
		t.Errorf("an empty flush: %v, want nil and no call", err)
	}
	proc.Stop()
	if err := flushAdmissions(ctx, rdb, map[string][2]int64{"acme": {1, 0}}); err == nil || !strings.Contains(err.Error(), "acme") {
		t.Errorf("flush with Redis down: %v, want an error naming the tenant", err)
	}
}
