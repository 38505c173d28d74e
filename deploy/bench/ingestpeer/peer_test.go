package ingestpeer_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/deploy/bench/ingestpeer"
	"github.com/sluicehq/sluice/internal/testenv"
)

// ExampleNew serves the peer for one tenant keyed "k1" at 100 jobs/s (it
// needs a Redis; no output is checked).
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	peer := ingestpeer.New(ingestpeer.Config{Redis: rdb, Tenants: map[string]string{"k1": "acme"}, PerSecond: 100, Prefix: "peer:"})
	srv := httptest.NewServer(peer)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", strings.NewReader(`{"type":"email"}`))
	req.Header.Set("Authorization", "Bearer k1")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		fmt.Println(res.StatusCode, peer.QueueKey("acme"))
	}
}

// TestPeer: a POST /v1/jobs is a 202 that pushes the job; another method
// is a 405, another path a 404, an unknown key a 401.
func TestPeer(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	tenant := testenv.Name(t, "peer")
	peer := ingestpeer.New(ingestpeer.Config{Redis: rdb, Tenants: map[string]string{"k": tenant}, PerSecond: 100})
	srv := httptest.NewServer(peer)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { rdb.Del(context.Background(), peer.QueueKey(tenant), "rate:peer:"+tenant) })
	for _, c := range []struct {
		method, path, key string
		want              int
	}{
		{http.MethodPost, "/v1/jobs", "k", http.StatusAccepted},
		{http.MethodGet, "/v1/jobs", "k", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/other", "k", http.StatusNotFound},
		{http.MethodPost, "/v1/jobs", "nope", http.StatusUnauthorized},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(`{"type":"t"}`))
		req.Header.Set("Authorization", "Bearer "+c.key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("%s %s (key %s) = %d, want %d", c.method, c.path, c.key, res.StatusCode, c.want)
		}
	}
	if n := rdb.LLen(context.Background(), peer.QueueKey(tenant)).Val(); n != 1 {
		t.Errorf("queue holds %d jobs, want 1", n)
	}
	if n := rdb.Exists(context.Background(), "rate:peer:"+tenant).Val(); n != 1 {
		t.Errorf("limiter key rate:peer:%s exists %d, want 1 (redis_rate's own prefix)", tenant, n)
	}
}
