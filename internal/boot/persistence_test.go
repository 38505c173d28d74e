package boot_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/boot"
	"github.com/sluicehq/sluice/internal/testenv"
)

// TestCheckPersistence: a Redis without persistence is warned about at
// start (naming the queued jobs on the Redis backend) and reads 0 in
// sluice_redis_persistent; one with the append-only file reads 1 and is
// not warned about.
func TestCheckPersistence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want float64
	}{
		{"none", nil, 0},
		{"aof", []string{"--appendonly", "yes"}, 1},
		{"rdb", []string{"--save", "3600 1"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			proc := testenv.StartRedis(t, tc.args...)
			rdb := redis.NewClient(&redis.Options{Addr: proc.Addr()})
			t.Cleanup(func() { rdb.Close() })
			var logs bytes.Buffer
			reg := prometheus.NewRegistry()
			boot.CheckPersistence(context.Background(), rdb, "redis", slog.New(slog.NewTextHandler(&logs, nil)), reg)
			if got := testenv.MetricValue(t, reg, "sluice_redis_persistent", map[string]string{"addr": proc.Addr()}); got != tc.want {
				t.Errorf("sluice_redis_persistent = %v, want %v", got, tc.want)
			}
			warned := strings.Contains(logs.String(), "every queued job")
			if warned != (tc.want == 0) {
				t.Errorf("warning logged = %v, want %v; log:\n%s", warned, tc.want == 0, logs.String())
			}
		})
	}
}
