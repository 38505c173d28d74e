// Command demoload sends a modest, steady load of jobs to sluice's ingest
// through the client package, one stream per tenant, and prints once a
// second how many were accepted (202) and throttled (429) in that second,
// then the totals. make run starts it against the local stack
// (configs/sluice.local.yaml).
//
//	demoload --url http://127.0.0.1:8080 --duration 10m \
//	  --load acme:acme-local-key:30:email,globex:globex-local-key:10:report
//
// By default every job is tried once (--tries 1), so each 429 is counted
// as the server gave it; --tries N lets the client wait Retry-After (or
// back off with jitter) and try again, as a polite producer does.
// Exit codes: 0 when the run ends (duration over, SIGINT or SIGTERM),
// 2 on bad flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// defaultLoad is the local stack's demo load (see configs/sluice.local.yaml).
const defaultLoad = "acme:acme-local-key:30:email,globex:globex-local-key:10:report,initech:initech-local-key:8:sms"

func main() {
	os.Exit(run())
}

func run() int {
	url := flag.String("url", "http://127.0.0.1:8080", "ingest base URL")
	load := flag.String("load", defaultLoad, "streams, comma-separated: name:key:jobs_per_second[:type]")
	duration := flag.Duration("duration", 10*time.Minute, "how long to send")
	tries := flag.Int("tries", 1, "tries per job (1: count every 429; more: wait Retry-After and retry)")
	inFlight := flag.Int("max-in-flight", 64, "open requests per stream at most; a tick beyond is skipped")
	flag.Parse()
	streams, err := parseStreams(*load)
	if err != nil || *duration <= 0 || *tries < 1 || *inFlight < 1 {
		if err == nil {
			err = fmt.Errorf("--duration, --tries and --max-in-flight must be positive")
		}
		fmt.Fprintln(os.Stderr, "demoload:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	for _, st := range streams {
		fmt.Printf("demoload: %s sends %g %s jobs/s to %s\n", st.Name, st.Rate, st.Type, *url)
	}
	runLoad(ctx, loadConfig{
		URL: *url, Streams: streams, Duration: *duration, Tries: *tries, MaxInFlight: *inFlight,
		Out: os.Stdout, Errors: os.Stderr,
	})
	return 0
}

// newHTTPClient keeps up to maxInFlight idle connections per stream, and no
// lower total cap, so a steady load reuses them instead of opening one per
// job.
func newHTTPClient(maxInFlight int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = maxInFlight
	tr.MaxIdleConns = 0 // no total cap below the per-host one (see drainer.NewHTTPSink)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}
