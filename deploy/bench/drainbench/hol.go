package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// holRow is one head-of-line benchmark's figures (requirement 3): tenant
// B's dispatch delay, queued to the sink, while tenant A's 100,000-job
// backlog drains at 10 jobs/s.
type holRow struct {
	name     string // BenchmarkHeadOfLineRedis, ...Kafka
	jobs     int
	p50, p99 float64 // ms
}

// headOfLine runs the drainer package's HeadOfLine benchmarks (every
// backend that has one) with jobs jobs of tenant B each, and parses their
// p50_ms and p99_ms.
func headOfLine(ctx context.Context, o *options) ([]holRow, string, error) {
	args := []string{"test", "./drainer", "-run", "^$", "-bench", "HeadOfLine",
		"-benchtime", strconv.Itoa(o.holJobs) + "x", "-count", "1", "-timeout", "10m"}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = o.root
	cmd.Env = append(os.Environ(), "SLUICE_TEST_REDIS="+o.redisAddr, "SLUICE_TEST_KAFKA="+strings.Join(o.kafkaBrokers, ","))
	out, err := cmd.CombinedOutput()
	command := "go " + strings.Join(args, " ")
	rows := parseHOL(string(out))
	if err != nil {
		return rows, command, fmt.Errorf("drainbench: %s: %w: %s", command, err, lastLines(string(out), 15))
	}
	if len(rows) == 0 {
		return nil, command, fmt.Errorf("drainbench: %s printed no HeadOfLine result: %s", command, lastLines(string(out), 15))
	}
	return rows, command, nil
}

// parseHOL reads "BenchmarkHeadOfLineX-2  500  ...  12.3 p50_ms  45.6 p99_ms"
// lines of go test -bench output.
func parseHOL(out string) []holRow {
	var rows []holRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[0], "BenchmarkHeadOfLine") {
			continue
		}
		r := holRow{name: f[0]}
		if i := strings.LastIndex(r.name, "-"); i > 0 {
			r.name = r.name[:i]
		}
		r.jobs, _ = strconv.Atoi(f[1])
		ok50, ok99 := false, false
		for i := 2; i+1 < len(f); i++ {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "p50_ms":
				r.p50, ok50 = v, true
			case "p99_ms":
				r.p99, ok99 = v, true
			}
		}
		if ok50 && ok99 {
			rows = append(rows, r)
		}
	}
	return rows
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
