// Command summary prints the one table of issue 11's ratios that `make
// bench` ends with (requirement 7): for each figure sluice's, its peer's
// from the same run, the ratio, the goal and whether it is met, with the
// commit and the machine. It reads what the bench run left in one
// directory:
//
//	*.txt       `go test -bench` output (every file: result lines are
//	            picked out, everything else ignored) and
//	            deploy/bench/kafka-perf.sh's output
//	drain.json  drainbench's results (BENCH_JSON; deploy/bench/drainresult)
//
// A figure the run did not produce reads "not run"; nothing is filled in
// from another run.
//
//	go run ./deploy/bench/summary -in .cache/bench/<run>
//
// The table goes to stdout and to <out>/summary-<UTC timestamp>.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

func main() {
	in := flag.String("in", "", "the bench run's directory (go test -bench outputs, kafka-perf output, drain.json)")
	out := flag.String("out", "deploy/bench/results", "where to write summary-<UTC>.md")
	command := flag.String("command", "make bench", "the command to print")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "summary: -in is required")
		os.Exit(2)
	}
	ins, err := load(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(2)
	}
	now := time.Now().UTC()
	md := render(ins, header{at: now, command: *command, commit: commit(), machine: machine(ins.drain)})
	fmt.Print(md)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
	path := filepath.Join(*out, "summary-"+now.Format("20060102T150405Z")+".md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "summary:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "summary: written to", path)
}

// load reads every input in dir; missing ones leave their rows "not run".
func load(dir string) (inputs, error) {
	in := inputs{bench: benches{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return in, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return in, err
		}
		parseGoBench(strings.NewReader(string(b)), in.bench)
		if k := parseKafkaPerf(strings.NewReader(string(b))); k.ok {
			in.kafka = k
		}
	}
	d, err := drainresult.Read(filepath.Join(dir, "drain.json"))
	switch {
	case err == nil:
		in.drain = d
	case !errors.Is(err, fs.ErrNotExist):
		return in, err
	}
	return in, nil
}

// header is what the summary states besides the table.
type header struct {
	at      time.Time
	command string
	commit  string
	machine string
}

// render is the summary as markdown.
func render(in inputs, h header) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# sluice benchmark summary\n\n")
	fmt.Fprintf(&b, "Commit `%s`, %s, `%s`. Machine: %s. Every ratio compares two figures of this one run.\n\n",
		h.commit, h.at.Format("2006-01-02 15:04 MST"), h.command, h.machine)
	b.WriteString("| what | sluice | peer | ratio | goal | met |\n|---|--:|--:|--:|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for _, r := range in.rows() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", cell(r.what), cell(r.sluice), cell(r.peer), cell(r.ratio), cell(r.goal), cell(r.met))
	}
	b.WriteString("\n" + drainNote(in.drain) + " Redis commands per job count every client of the drain run's Redis")
	if in.drain != nil && in.drain.CmdsExact {
		b.WriteString(" (a private server: exact)")
	}
	b.WriteString(". \"not run\": the run did not produce that figure.\n")
	return b.String()
}

// drainNote says what the drain rows' figures are.
func drainNote(d *drainresult.Report) string {
	if d == nil || len(d.TputMedians) == 0 {
		return "Drain throughput rows: not run."
	}
	return fmt.Sprintf("Drain throughput rows: each figure is the median over %d alternated round(s) of drainbench's rows "+
		"(BENCH_TPUT_ROUNDS; every round runs each row once, BullMQ's in the middle of sluice's), "+
		"each ratio the median of the rounds' ratios (rows of the same round), and the goal needs at least %d rounds. "+
		"Unthrottled Redis cmds/job are medians over the rounds too.", d.TputRounds, minRounds)
}

// commit is the checked-out commit, "+dirty" when the work tree differs.
func commit() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += "+dirty"
	}
	return c
}

// machine describes the host: the drain run's lines when it ran, else the
// CPU count and the load now.
func machine(d *drainresult.Report) string {
	if d != nil && len(d.Machine) > 0 {
		return strings.Join(d.Machine, "; ") + fmt.Sprintf("; load at the drain run's start %s, end %s", d.LoadStart, d.LoadEnd)
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d CPUs, %s, load %s at the summary", runtime.NumCPU(), runtime.Version(), load)
}
