package depth

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/lua"
)

// sampleCall is history_sample.lua's call for tenant: KEYS backlog, outflow,
// history; ARGV the step, span and TTL in seconds (keys.HistoryStep,
// keys.HistorySpan, keys.HistoryTTL).
func sampleCall(tenant string) lua.Call {
	return lua.Call{Script: lua.HistorySample,
		Keys: []string{keys.Backlog(tenant), keys.Outflow(tenant), keys.History(tenant)},
		Args: []any{int64(keys.HistoryStep / time.Second), int64(keys.HistorySpan / time.Second), int64(keys.HistoryTTL / time.Second)}}
}

// parseSample checks history_sample.lua's reply: the backlog counter as
// stored, "" when absent. Its error wraps lua.ErrReply, or is the call's.
func parseSample(v any, err error) (string, error) {
	if err != nil {
		return "", fmt.Errorf("depth: sample: %w", err)
	}
	return lua.HistorySample.String(v, "backlog")
}

// Point is one slot of a tenant's history.
type Point struct {
	// T is the slot's first second, unix seconds (a multiple of
	// keys.HistoryStep).
	T int64 `json:"t"`
	// Backlog is the tenant's backlog counter (units) at the slot's last
	// sample.
	Backlog int64 `json:"backlog"`
	// Outflow is the units dispatched per second across all drainers over
	// the keys.HistoryStep complete seconds before that sample.
	Outflow float64 `json:"outflow"`
}

// ReadHistory returns tenant's history over the last keys.HistorySpan before
// Redis TIME, oldest first, in one round trip (TIME and HGETALL pipelined).
// A slot no instance sampled (none ran) is absent; a malformed field is
// skipped.
func ReadHistory(ctx context.Context, rdb redis.UniversalClient, tenant string) ([]Point, error) {
	var now *redis.TimeCmd
	var all *redis.MapStringStringCmd
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		all = p.HGetAll(ctx, keys.History(tenant))
		return nil
	})
	if err := now.Err(); err != nil {
		return nil, fmt.Errorf("depth: history of %s: %w", tenant, err)
	}
	if err := all.Err(); err != nil {
		return nil, fmt.Errorf("depth: history of %s: %w", tenant, err)
	}
	return historyPoints(all.Val(), now.Val().Unix()), nil
}

// historyPoints parses the history hash's fields, keeping the slots within
// keys.HistorySpan before the unix second now, oldest first.
func historyPoints(fields map[string]string, now int64) []Point {
	from := now - int64(keys.HistorySpan/time.Second)
	pts := make([]Point, 0, len(fields))
	for f, v := range fields {
		t, err := strconv.ParseInt(f, 10, 64)
		if err != nil || t < from || t > now {
			continue
		}
		b, o, ok := strings.Cut(v, " ")
		if !ok {
			continue
		}
		backlog, err1 := strconv.ParseFloat(b, 64)
		out, err2 := strconv.ParseFloat(o, 64)
		if err1 != nil || err2 != nil || math.IsNaN(backlog) || math.IsNaN(out) || math.IsInf(backlog, 0) || math.IsInf(out, 0) {
			continue
		}
		n := int64(math.MaxInt64)
		if backlog < math.MaxInt64 {
			n = int64(max(backlog, 0))
		}
		pts = append(pts, Point{T: t, Backlog: n, Outflow: max(out, 0)})
	}
	slices.SortFunc(pts, func(a, b Point) int { return int(a.T - b.T) })
	return pts
}
