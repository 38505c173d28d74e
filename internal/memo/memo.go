// Package memo memoizes pure functions of comparable keys for the hot
// paths (admission in limits, the enqueue's keys in queue/redisq).
package memo

import (
	"sync"
	"sync/atomic"
)

// Memo memoizes a pure function of comparable keys, for the hot path's
// validation and key building. Tenants and policies come from
// configuration, so few distinct keys are expected; past max entries it
// stops storing and computes every time, so hostile input cannot grow it
// without bound. The zero Memo stores nothing: set Max.
type Memo[K comparable, V any] struct {
	m   sync.Map // K → V
	n   atomic.Int64
	Max int64
}

// Get returns f(k), computed once while fewer than Max keys are stored.
func (c *Memo[K, V]) Get(k K, f func(K) V) V {
	if v, ok := c.m.Load(k); ok {
		return v.(V)
	}
	v := f(k)
	if c.n.Load() < c.Max {
		if _, loaded := c.m.LoadOrStore(k, v); !loaded {
			c.n.Add(1)
		}
	}
	return v
}
