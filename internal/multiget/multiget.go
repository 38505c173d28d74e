// Package multiget reads many string keys of different tenants at once:
// one MGET on a single Redis, one GET per key in a pipeline on a Cluster
// or a Ring (the keys lie in different hash slots, which MGET refuses).
// The drainer's probe and the depth sampler read every tenant's backlog
// counter this way each round, so an idle tenant costs a key in an MGET,
// not a command.
package multiget

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Batch bounds the keys of one MGET, so one call never holds Redis for long.
const Batch = 2000

// Get returns the value of each key, in order: a string, nil for a missing
// key, or the error of that key's read (counted in failed; err is the first
// of them). A failed MGET fails every key of its batch.
func Get(ctx context.Context, rdb redis.UniversalClient, keys []string) (vals []any, failed int, err error) {
	if len(keys) == 0 {
		return nil, 0, nil
	}
	if single, ok := rdb.(*redis.Client); ok {
		return mget(ctx, single, keys)
	}
	gets := make([]*redis.StringCmd, len(keys))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			gets[i] = p.Get(ctx, k)
		}
		return nil
	})
	vals = make([]any, len(keys))
	for i, g := range gets {
		switch v, gerr := g.Result(); {
		case gerr == nil:
			vals[i] = v
		case gerr != redis.Nil:
			vals[i] = gerr
			if failed++; err == nil {
				err = gerr
			}
		}
	}
	return vals, failed, err
}

// mget reads keys with one MGET per Batch keys; a failed MGET fails its keys.
func mget(ctx context.Context, rdb *redis.Client, keys []string) (vals []any, failed int, err error) {
	vals = make([]any, 0, len(keys))
	for from := 0; from < len(keys); from += Batch {
		part := keys[from:min(from+Batch, len(keys))]
		got, merr := rdb.MGet(ctx, part...).Result()
		if merr == nil && len(got) != len(part) {
			merr = fmt.Errorf("redis: MGET of %d keys answered %d values", len(part), len(got))
		}
		if merr != nil {
			err, failed = merr, failed+len(part)
			got = make([]any, len(part))
			for i := range got {
				got[i] = merr
			}
		}
		vals = append(vals, got...)
	}
	return vals, failed, err
}
