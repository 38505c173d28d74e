package boot

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// Persistence is what a Redis server keeps across a restart, as its INFO
// persistence and CONFIG GET save say.
type Persistence struct {
	// Addr is the server (a Cluster's master, or the one server).
	Addr string
	// AOF: the append-only file is on (appendonly yes).
	AOF bool
	// Snapshots: RDB save points are set (save is not ""); unknown when
	// CONFIG is not allowed, as on many managed Redis, and then false.
	Snapshots bool
}

// Persistent reports whether the server keeps its data across a restart.
func (p Persistence) Persistent() bool { return p.AOF || p.Snapshots }

// ReadPersistence reads the persistence of every server of rdb: each
// master of a Redis Cluster, or the one server (with a Sentinel failover
// client, the current primary).
func ReadPersistence(ctx context.Context, rdb redis.UniversalClient) ([]Persistence, error) {
	var (
		mu  sync.Mutex
		out []Persistence
	)
	read := func(ctx context.Context, c *redis.Client) error {
		p, err := persistenceOf(ctx, c)
		if err != nil {
			return err // unknown, not "keeps nothing"
		}
		mu.Lock()
		out = append(out, p)
		mu.Unlock()
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, read)
	case *redis.Client:
		err = read(ctx, c)
	default:
		return nil, fmt.Errorf("boot: read Redis persistence: a %T is neither a client nor a cluster client", rdb)
	}
	return out, err
}

// persistenceOf reads one server's persistence.
func persistenceOf(ctx context.Context, c *redis.Client) (Persistence, error) {
	p := Persistence{Addr: serverAddr(ctx, c)}
	info, err := c.Info(ctx, "persistence").Result()
	if err != nil {
		return p, fmt.Errorf("boot: INFO persistence of %s: %w", p.Addr, err)
	}
	p.AOF = strings.Contains(info, "aof_enabled:1")
	if save, err := c.ConfigGet(ctx, "save").Result(); err == nil {
		p.Snapshots = strings.TrimSpace(save["save"]) != ""
	}
	return p, nil
}

// CheckPersistence reads the persistence of every server of rdb, sets the
// gauge sluice_redis_persistent{addr} (1 when the server keeps its data
// across a restart: AOF or RDB save points, else 0) and logs a warning for
// each server that keeps nothing: on the Redis queue backend a restart of
// it loses every queued job, and on both backends every job's state,
// scheduled job and dead letter. It never stops the start: a Redis
// without persistence is the operator's choice to make, knowingly.
func CheckPersistence(ctx context.Context, rdb redis.UniversalClient, backend string, log *slog.Logger, reg prometheus.Registerer) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_redis_persistent",
		Help: "1 when the Redis server keeps its data across a restart (append-only file or RDB save points), 0 when it keeps nothing; read at start.",
	}, []string{"addr"})
	if reg != nil {
		if err := reg.Register(g); err != nil {
			log.Warn("boot: register sluice_redis_persistent", "err", err)
		}
	}
	servers, err := ReadPersistence(ctx, rdb)
	if err != nil {
		log.Warn("boot: cannot read Redis persistence; sluice_redis_persistent is incomplete", "err", err)
	}
	for _, p := range servers {
		v := 0.0
		if p.Persistent() {
			v = 1
		}
		g.WithLabelValues(p.Addr).Set(v)
		if p.Persistent() {
			continue
		}
		what := "every job's state, scheduled job and dead letter"
		if backend == "redis" {
			what = "every queued job (queue.backend redis), and " + what
		}
		log.Warn("Redis keeps nothing across a restart (appendonly no, no save points): a restart loses "+what+
			"; run it with --appendonly yes --appendfsync everysec", "addr", p.Addr, "backend", backend)
	}
}

// serverAddr is c's server address: its Addr, or for a Sentinel failover
// client (whose Addr is go-redis's placeholder "FailoverClient") the
// primary's address as CLIENT INFO's laddr names it (Redis 6.2 and newer).
func serverAddr(ctx context.Context, c *redis.Client) string {
	addr := c.Options().Addr
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	if info, err := c.ClientInfo(ctx).Result(); err == nil && info.LAddr != "" {
		return info.LAddr
	}
	return addr
}
