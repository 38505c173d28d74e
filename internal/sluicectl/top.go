package sluicectl

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/client"
)

// frame is what one refresh of top shows.
type frame struct {
	URL      string
	At       time.Time
	Interval time.Duration
	// Err is set when the tenants could not be listed.
	Err  error
	Rows []row
}

// row is one tenant's line: its stats, or the error that replaced them.
type row struct {
	Tenant string
	Stats  client.Stats
	Err    error
}

// statsWorkers bounds the stats requests of one frame in flight at once.
const statsWorkers = 8

// top shows every tenant's backlog, admission and outflow rates, water
// level, in-flight and dead jobs, drain ETA and paused state, refreshed every --interval until q, Ctrl-C, or
// --frames frames. On a terminal it redraws the screen in place; otherwise
// it prints plain frames separated by a blank line.
func (c *cmd) top(ctx context.Context, args []string) error {
	fs := c.flags("", "[--interval 1s] [--frames N] [--plain] [TENANT...]")
	interval := fs.Duration("interval", time.Second, "time between refreshes")
	frames := fs.Int("frames", 0, "stop after this many frames (0: until q or Ctrl-C)")
	plain := fs.Bool("plain", false, "print plain frames even on a terminal")
	names, err := c.parse(fs, args, 0, -1)
	if err != nil {
		return err
	}
	if *interval < 100*time.Millisecond {
		return usagef("--interval must be at least 100ms (got %s)", *interval)
	}
	if len(names) == 0 && c.g.adminToken == "" {
		return usagef("listing every tenant needs an admin token (--admin-token, SLUICE_ADMIN_TOKEN); or name the tenants: top acme globex")
	}
	// A frame's requests end before the next frame is due: no retries,
	// each bounded by the interval (at least 1 s).
	timeout := max(*interval, time.Second)
	view, err := c.viewer(client.WithMaxTries(1))
	if err != nil {
		return err
	}
	var admin *client.Admin
	if len(names) == 0 {
		if admin, err = c.admin(client.WithMaxTries(1)); err != nil {
			return err
		}
	}
	out := c.env.Stdout
	tty := !*plain && isTerminal(out)
	quit := make(chan struct{})
	go watchKeys(c.env.Stdin, quit)
	if tty {
		if f, ok := c.env.Stdin.(*os.File); ok {
			restore := rawInput(f)
			defer restore()
		}
		// Alternate screen, cursor hidden; both undone on the way out.
		fmt.Fprint(out, "\x1b[?1049h\x1b[?25l")
		defer fmt.Fprint(out, "\x1b[?25h\x1b[?1049l")
	}
	return c.topLoop(ctx, topRun{view: view, admin: admin, names: names, interval: *interval, timeout: timeout, frames: *frames}, tty, quit)
}

// topRun is what top's loop shows: the tenants names (all, through admin,
// when empty), refreshed every interval, each frame's requests bounded by
// timeout, until frames frames (0: no bound).
type topRun struct {
	view              *client.Client
	admin             *client.Admin
	names             []string
	interval, timeout time.Duration
	frames            int
}

// topLoop draws r's frames on c's stdout (redrawing the screen when tty)
// until r.frames, ctx is done, or quit is closed.
func (c *cmd) topLoop(ctx context.Context, r topRun, tty bool, quit <-chan struct{}) error {
	out := c.env.Stdout
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	for n := 1; ; n++ {
		fctx, cancel := context.WithTimeout(ctx, r.timeout)
		f := fetchFrame(fctx, r.view, r.admin, r.names)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		f.URL, f.At, f.Interval = c.g.url, c.env.Clock.Now(), r.interval
		text := render(f)
		if tty {
			fmt.Fprint(out, ttyFrame(text))
		} else {
			fmt.Fprintln(out, text)
		}
		if r.frames > 0 && n >= r.frames {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-quit:
			return nil
		case <-tick.C:
		}
	}
}

// fetchFrame lists the tenants (when names is empty) and gets each one's
// stats, statsWorkers at a time.
func fetchFrame(ctx context.Context, view *client.Client, admin *client.Admin, names []string) frame {
	var f frame
	if len(names) == 0 {
		ts, err := admin.Tenants(ctx)
		if err != nil {
			f.Err = err
			return f
		}
		for _, t := range ts {
			names = append(names, t.ID)
		}
		sort.Strings(names)
	}
	f.Rows = make([]row, len(names))
	sem := make(chan struct{}, statsWorkers)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			st, err := view.Stats(ctx, name)
			f.Rows[i] = row{Tenant: name, Stats: st, Err: err}
		})
	}
	wg.Wait()
	return f
}

// render lays out a frame as text, one line per tenant:
//
//	TENANT  BACKLOG  ADM/s  REF/s  CONF/s  EFF/s  MEAS/s  WATER/CAP  [bar]  IN-FLIGHT  DLQ  ETA  NOTE
//
// ADM and REF are the jobs admitted and refused (429) per second across the
// ingest instances, CONF is the configured outflow rate, EFF the rate
// drainers use now (lower during adaptive backoff), MEAS the rate delivered
// over the last 10 s (all over the last 10 complete seconds); the bar fills
// with the water level out of the bucket's capacity, and ETA is backlog ÷
// EFF. NOTE says PAUSED for a paused tenant (no delivery starts).
func render(f frame) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sluice top · %s · %s · every %s · q quits\n\n", f.URL, f.At.Format("2006-01-02 15:04:05"), f.Interval)
	if f.Err != nil {
		fmt.Fprintf(&b, "cannot list tenants: %s\n", errText(f.Err))
		return b.String()
	}
	if len(f.Rows) == 0 {
		b.WriteString("no tenants\n")
		return b.String()
	}
	w := len("TENANT")
	for _, r := range f.Rows {
		w = max(w, len(r.Tenant))
	}
	fmt.Fprintf(&b, "%-*s %8s %7s %7s %7s %7s %7s  %-11s %-12s %9s %5s %8s  %s\n", w,
		"TENANT", "BACKLOG", "ADM/s", "REF/s", "CONF/s", "EFF/s", "MEAS/s", "WATER/CAP", "", "IN-FLIGHT", "DLQ", "ETA", "NOTE")
	var backlog int64
	var measured float64
	failed, paused := 0, 0
	for _, r := range f.Rows {
		if r.Err != nil {
			failed++
			fmt.Fprintf(&b, "%-*s error: %s\n", w, r.Tenant, errText(r.Err))
			continue
		}
		s, o := r.Stats, r.Stats.Outflow
		backlog += s.Backlog
		measured += o.MeasuredRate
		if s.Paused {
			paused++
		}
		water := fixed1(s.WaterLevel) + "/" + num(o.Capacity)
		line := fmt.Sprintf("%-*s %8d %7s %7s %7s %7s %7s  %-11s %-12s %9d %5d %8s  %s", w,
			r.Tenant, s.Backlog, rate(s.Admission.AdmittedRate), rate(s.Admission.RefusedRate),
			rate(o.ConfiguredRate), rate(o.EffectiveRate), rate(o.MeasuredRate),
			water, bar(s.WaterLevel, o.Capacity, 10), s.InFlight, s.DLQ, eta(s.ETASeconds), note(s))
		b.WriteString(strings.TrimRight(line, " "))
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "\n%d tenants · backlog %d · delivering %s/s", len(f.Rows), backlog, rate(measured))
	if paused > 0 {
		fmt.Fprintf(&b, " · %d paused", paused)
	}
	if failed > 0 {
		fmt.Fprintf(&b, " · %d not answered", failed)
	}
	b.WriteByte('\n')
	return b.String()
}

// note flags what needs a look: the tenant paused (first: nothing is
// delivered), the outflow backed off below its configuration, or no outflow
// limit at all.
func note(s client.Stats) string {
	o := s.Outflow
	switch {
	case s.Paused:
		return "PAUSED (resume: sluicectl resume " + s.Tenant + ")"
	case o.Unlimited:
		return "no outflow limit"
	case o.EffectiveRate < o.ConfiguredRate:
		return "backing off (downstream 429/503)"
	}
	return ""
}

// bar draws level out of capacity in width cells: "[####......]".
func bar(level, capacity float64, width int) string {
	fill := 0
	if capacity > 0 {
		fill = int(math.Round(level / capacity * float64(width)))
	}
	fill = min(max(fill, 0), width)
	return "[" + strings.Repeat("#", fill) + strings.Repeat(".", width-fill) + "]"
}

// eta writes seconds as "45s", "3m05s", "2h10m"; nil (no rate) is "-".
func eta(sec *float64) string {
	if sec == nil || math.IsNaN(*sec) || *sec < 0 {
		return "-"
	}
	s := int64(math.Ceil(*sec))
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
}

func rate(r float64) string { return fixed1(r) }

func fixed1(f float64) string { return fmt.Sprintf("%.1f", f) }

// errText is an error in a frame: the server's problem on one line.
func errText(err error) string {
	if e, ok := err.(*client.Error); ok {
		return describe(e)
	}
	return err.Error()
}

// ttyFrame turns a frame into an in-place redraw: cursor home, each line
// followed by erase-to-end-of-line, then erase below.
func ttyFrame(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	return "\x1b[H" + strings.Join(lines, "\x1b[K\r\n") + "\x1b[K\r\n\x1b[J"
}

// watchKeys closes quit when q, Q or Ctrl-C (ETX, in raw mode) arrives on
// in; at EOF or an error it stops watching.
func watchKeys(in io.Reader, quit chan<- struct{}) {
	buf := make([]byte, 64)
	for {
		n, err := in.Read(buf)
		for _, k := range buf[:n] {
			if k == 'q' || k == 'Q' || k == 3 {
				close(quit)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && fileIsTerminal(f)
}
