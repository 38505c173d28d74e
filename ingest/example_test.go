package ingest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/internal/boot"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/backend"
	"github.com/sluicehq/sluice/queue/redisq"
)

// exampleRedis is the shared test Redis (deploy/local/services.sh up).
func exampleRedis() *redis.Client {
	addr := os.Getenv("SLUICE_TEST_REDIS")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	return redis.NewClient(&redis.Options{Addr: addr})
}

// ExampleNew builds a Server on Redis (limits, idempotency and the queue)
// and submits one job through its Handler.
func ExampleNew() {
	ctx := context.Background()
	rdb := exampleRedis()
	defer rdb.Close()
	defer rdb.Del(ctx, keys.Queue("example"), keys.Backlog("example"), keys.Idempotency("example", "welcome-1"),
		keys.Admission("example", "gcra", "tenant"))

	cfg, err := config.Parse([]byte(`
tenants:
  example:
    api_keys: ["` + config.HashKey("s3cret") + `"]
    admission: {algorithm: gcra, limit: 10, period: 1s}
`))
	if err != nil {
		log.Fatal(err)
	}
	admitter, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	producer, err := redisq.NewProducer(redisq.ProducerConfig{Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := ingest.New(ingest.Config{
		Settings: cfg, Redis: rdb, Producer: producer, Admitter: admitter,
		Registerer: reg, Gatherer: reg,
	})
	if err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	req, _ := http.NewRequest("POST", hs.URL+"/v1/jobs", strings.NewReader(`{"type":"email","id":"welcome-1","payload":{"to":"ada@example.com"}}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(resp.Header.Get("RateLimit-Policy"))
	fmt.Println(resp.Header.Get("RateLimit"))
	fmt.Println(strings.Contains(string(body), `"job_id":"welcome-1"`))
	// Output:
	// 202 Accepted
	// "tenant";q=10;w=1
	// "tenant";r=9;t=1
	// true
}

// ExampleServer_Run serves until SIGINT or SIGTERM, then drains in-flight
// requests and closes the producer, as cmd/ingest does.
func ExampleServer_Run() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load("") // $SLUICE_CONFIG
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis.Addr, ReadTimeout: cfg.Redis.Timeout, WriteTimeout: cfg.Redis.Timeout})
	defer rdb.Close()
	admitter, err := limits.NewAdmitter(limits.AdmitterConfig{Redis: rdb})
	if err != nil {
		log.Fatal(err)
	}
	producer, err := backend.NewProducer(ctx, boot.Queue(cfg, rdb, nil, nil))
	if err != nil {
		log.Fatal(err)
	}
	srv, err := ingest.New(ingest.Config{Settings: cfg, Redis: rdb, Producer: producer, Admitter: admitter})
	if err != nil {
		log.Fatal(err)
	}
	if err := srv.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
