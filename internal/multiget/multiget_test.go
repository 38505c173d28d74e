package multiget_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/multiget"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestGet (a single Redis and a Cluster): values in order, nil for a
// missing key, across more than one MGET batch and across slots; a single
// Redis answers with one MGET per Batch keys, not one GET per key.
func TestGet(t *testing.T) {
	t.Parallel()
	for name, rdb := range map[string]redis.UniversalClient{"single": testenv.Redis(t), "cluster": testenv.Cluster(t)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			n := multiget.Batch + 7
			ks := make([]string, n)
			for i := range ks {
				ks[i] = fmt.Sprintf("{%s-%d}:counter", testenv.Name(t, "k"), i)
				if i%3 == 0 {
					if err := rdb.Set(ctx, ks[i], i, 0).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			t.Cleanup(func() {
				for _, k := range ks {
					rdb.Del(context.Background(), k)
				}
			})
			vals, failed, err := multiget.Get(ctx, rdb, ks)
			if err != nil || failed != 0 || len(vals) != n {
				t.Fatalf("Get: %d values, %d failed, err %v; want %d, 0, nil", len(vals), failed, err, n)
			}
			for i, v := range vals {
				want := any(nil)
				if i%3 == 0 {
					want = fmt.Sprint(i)
				}
				if v != want {
					t.Fatalf("key %d: %v, want %v", i, v, want)
				}
			}
		})
	}
}

// TestGetFails: a closed client fails every key, each value its error.
func TestGetFails(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	vals, failed, err := multiget.Get(context.Background(), rdb, []string{"a", "b"})
	if err == nil || failed != 2 || len(vals) != 2 {
		t.Fatalf("Get on a dead address: %v values, %d failed, err %v", vals, failed, err)
	}
	for _, v := range vals {
		if e, ok := v.(error); !ok || !errors.Is(e, err) {
			t.Errorf("value %v, want the error %v", v, err)
		}
	}
}
