package ingest_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/ingest"
	"github.com/sluicehq/sluice/keys"
	"github.com/sluicehq/sluice/limits"
	"github.com/sluicehq/sluice/queue/redisq"
	"github.com/sluicehq/sluice/tenants"
)

// The admin API: Config.Tenants is a tenants.Registry whose Run hands every
// merged config to SetConfig, as cmd/ingest wires it; an admin changes a
// tenant's outflow rate with a merge patch.
func ExampleConfig_tenants() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := exampleRedis()
	defer rdb.Close()
	id := "example-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer rdb.Del(context.Background(), keys.Override(id), keys.Audit(id))
	defer rdb.SRem(context.Background(), keys.Tenants(), id)

	cfg, err := config.Parse([]byte(`
ingest:
  admin_tokens: {alice: "` + config.HashKey("alice-admin-token") + `"}
tenants:
  ` + id + `: {outflow: {rate: 5}}
`))
	if err != nil {
		log.Fatal(err)
	}
	reg, err := tenants.NewRegistry(tenants.RegistryConfig{Redis: rdb, Base: cfg})
	if err != nil {
		log.Fatal(err)
	}
	if err := reg.Sync(ctx); err != nil {
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
	srv, err := ingest.New(ingest.Config{Settings: reg.Config(), Redis: rdb, Producer: producer, Admitter: admitter, Tenants: reg})
	if err != nil {
		log.Fatal(err)
	}
	go reg.Run(ctx, srv.SetConfig)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	req, _ := http.NewRequest(http.MethodPatch, hs.URL+"/admin/v1/tenants/"+id, strings.NewReader(`{"outflow":{"rate":20}}`))
	req.Header.Set("Authorization", "Bearer alice-admin-token")
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status)
	fmt.Println(strings.Contains(string(body), `"source":"runtime"`), strings.Contains(string(body), `"rate":20`))
	fmt.Println(reg.Config().Tenants[id].Outflow.Rate)
	// Output:
	// 200 OK
	// true true
	// 20
}
