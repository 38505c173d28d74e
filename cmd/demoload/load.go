package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/client"
)

// stream is one tenant's share of the load: Rate jobs per second of Type,
// submitted with Key.
type stream struct {
	Name string
	Key  string
	Rate float64
	Type string
}

// parseStreams reads "name:key:rate[:type],..." (type defaults to "demo").
func parseStreams(s string) ([]stream, error) {
	var out []stream
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		parts := strings.Split(item, ":")
		if len(parts) < 3 || len(parts) > 4 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("load %q: want name:key:rate[:type]", item)
		}
		rate, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || rate <= 0 || rate > 10000 {
			return nil, fmt.Errorf("load %q: rate must be a number in (0, 10000]", item)
		}
		st := stream{Name: parts[0], Key: parts[1], Rate: rate, Type: "demo"}
		if len(parts) == 4 && parts[3] != "" {
			st.Type = parts[3]
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, errors.New("load: no streams")
	}
	return out, nil
}

// counts are one stream's outcomes so far.
type counts struct {
	accepted  atomic.Int64 // 202
	throttled atomic.Int64 // 429
	failed    atomic.Int64 // anything else: other statuses, connection errors
	skipped   atomic.Int64 // not sent: maxInFlight requests were still open
}

type snapshot struct{ accepted, throttled, failed, skipped int64 }

func (c *counts) load() snapshot {
	return snapshot{c.accepted.Load(), c.throttled.Load(), c.failed.Load(), c.skipped.Load()}
}

func (s snapshot) minus(o snapshot) snapshot {
	return snapshot{s.accepted - o.accepted, s.throttled - o.throttled, s.failed - o.failed, s.skipped - o.skipped}
}

// loadConfig is a run of the generator.
type loadConfig struct {
	URL      string
	Streams  []stream
	Duration time.Duration
	// Tries per job: 1 counts every 429 (the default); more lets the client
	// wait Retry-After and try again, as a polite producer would.
	Tries int
	// MaxInFlight bounds each stream's open requests; a tick that finds
	// them all open is counted as skipped.
	MaxInFlight int
	// Report is how often a line of counts is printed (default 1 s).
	Report time.Duration
	Out    io.Writer
	// Errors receives the first few failures, word for word.
	Errors io.Writer
}

// maxErrorLines bounds the failures printed in full.
const maxErrorLines = 5

// runLoad submits every stream's jobs at its rate until ctx ends or the
// duration is over, prints one line of per-stream counts every Report, and
// a total line per stream at the end. It returns the totals by stream name.
func runLoad(ctx context.Context, cfg loadConfig) map[string]snapshot {
	if cfg.Report <= 0 {
		cfg.Report = time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	all := make([]*counts, len(cfg.Streams))
	var errLines atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i, st := range cfg.Streams {
		all[i] = &counts{}
		c := client.New(cfg.URL, st.Key, client.WithMaxTries(cfg.Tries),
			client.WithHTTPClient(newHTTPClient(cfg.MaxInFlight)))
		wg.Go(func() {
			send(ctx, c, st, all[i], cfg.MaxInFlight, func(err error) {
				if errLines.Add(1) <= maxErrorLines {
					fmt.Fprintf(cfg.Errors, "demoload: %s: %v\n", st.Name, err)
				}
			})
		})
	}
	prev := make([]snapshot, len(all))
	tick := time.NewTicker(cfg.Report)
	defer tick.Stop()
	report := func() {
		var parts []string
		for i, st := range cfg.Streams {
			now := all[i].load()
			d := now.minus(prev[i])
			prev[i] = now
			parts = append(parts, fmt.Sprintf("%s ok=%d 429=%d err=%d", st.Name, d.accepted, d.throttled, d.failed+d.skipped))
		}
		fmt.Fprintf(cfg.Out, "t=%5.1fs  %s\n", time.Since(start).Seconds(), strings.Join(parts, " | "))
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tick.C:
			report()
		}
	}
	wg.Wait()
	totals := map[string]snapshot{}
	for i, st := range cfg.Streams {
		s := all[i].load()
		totals[st.Name] = s
		fmt.Fprintf(cfg.Out, "total %s: accepted=%d throttled=%d failed=%d skipped=%d in %s\n",
			st.Name, s.accepted, s.throttled, s.failed, s.skipped, time.Since(start).Round(time.Second))
	}
	return totals
}

// send submits st's jobs at st.Rate until ctx ends, each in its own
// goroutine, at most maxInFlight at once, and waits for them.
func send(ctx context.Context, c *client.Client, st stream, n *counts, maxInFlight int, fail func(error)) {
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(time.Duration(float64(time.Second) / st.Rate))
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			n.skipped.Add(1)
			continue
		}
		payload, _ := json.Marshal(map[string]any{"stream": st.Name, "n": seq})
		wg.Go(func() {
			defer func() { <-sem }()
			// A job already sent is answered even when the run ends.
			_, err := c.Submit(context.WithoutCancel(ctx), client.Job{Type: st.Type, Payload: payload})
			var apiErr *client.Error
			switch {
			case err == nil:
				n.accepted.Add(1)
			case errors.As(err, &apiErr) && apiErr.Status == 429:
				n.throttled.Add(1)
			default:
				n.failed.Add(1)
				fail(err)
			}
		})
	}
}
