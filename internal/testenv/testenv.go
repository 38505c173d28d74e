// Package testenv gives tests the addresses of the real Redis, Redis Cluster
// and Kafka that deploy/local/services.sh starts (make test runs it first).
// It never fakes a server: when one does not answer, the test fails with a
// message saying how to start it.
package testenv

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const hint = "start the local services first: bash deploy/local/services.sh up (make test does this)"

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// RedisAddr returns the shared standalone Redis (SLUICE_TEST_REDIS, default
// 127.0.0.1:6379) after checking that it answers PING.
func RedisAddr(t testing.TB) string {
	t.Helper()
	addr := env("SLUICE_TEST_REDIS", "127.0.0.1:6379")
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("testenv: redis at %s does not answer (%v); %s", addr, err, hint)
	}
	return addr
}

// Redis returns a client of the shared standalone Redis, closed when the test
// ends.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: RedisAddr(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

// ClusterAddrs returns the seed addresses of the shared 3-master Redis
// Cluster (SLUICE_TEST_REDIS_CLUSTER, comma-separated, default
// 127.0.0.1:7000-7002) after checking that the cluster state is ok.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	addrs := strings.Split(env("SLUICE_TEST_REDIS_CLUSTER", "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002"), ",")
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		t.Fatalf("testenv: redis cluster at %v is not ok (%v); %s", addrs, err, hint)
	}
	return addrs
}

// Cluster returns a client of the shared Redis Cluster, closed when the test
// ends.
func Cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: ClusterAddrs(t)})
	t.Cleanup(func() { c.Close() })
	return c
}

// KafkaBrokers returns the shared Kafka broker addresses (SLUICE_TEST_KAFKA,
// comma-separated, default 127.0.0.1:9092) after checking that the first one
// accepts a TCP connection.
func KafkaBrokers(t testing.TB) []string {
	t.Helper()
	brokers := strings.Split(env("SLUICE_TEST_KAFKA", "127.0.0.1:9092"), ",")
	conn, err := net.DialTimeout("tcp", brokers[0], 3*time.Second)
	if err != nil {
		t.Fatalf("testenv: kafka at %s does not answer (%v); %s", brokers[0], err, hint)
	}
	conn.Close()
	return brokers
}

// Name returns a unique, key-safe name for test-scoped tenants and topics,
// so tests sharing one server never see each other's state.
func Name(t testing.TB, prefix string) string {
	t.Helper()
	return prefix + "-" + strings.ToLower(randHex(6))
}
