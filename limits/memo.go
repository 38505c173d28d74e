package limits

import (
	"sync"
	"sync/atomic"
)

// memo memoizes a pure function of comparable keys, for the hot path's
// validation and key building. Tenants and policies come from
// configuration, so few distinct keys are expected; past max entries it
// stops storing and computes every time, so hostile input cannot grow it
// without bound.
type memo[K comparable, V any] struct {
	m   sync.Map // K → V
	n   atomic.Int64
	max int64
}

func (c *memo[K, V]) get(k K, f func(K) V) V {
	if v, ok := c.m.Load(k); ok {
		return v.(V)
	}
	v := f(k)
	if c.n.Load() < c.max {
		if _, loaded := c.m.LoadOrStore(k, v); !loaded {
			c.n.Add(1)
		}
	}
	return v
}
