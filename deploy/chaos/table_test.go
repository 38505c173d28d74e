//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// markdown renders the results as the table of README's Chaos section,
// followed by each row's notes.
func markdown(results []result) string {
	var b strings.Builder
	b.WriteString("| row | backend | 202'd | delivered | lost | duplicates | false 202 | recover (202 / delivery) | outflow vs rate | verdict |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %s / %s | %s | %s |\n",
			r.row, r.backend, r.accepted, r.delivered, r.lost, r.dups, r.false202,
			seconds(r.recover202), seconds(r.recoverOut), outflowCell(r), r.verdict)
	}
	for _, r := range results {
		for _, n := range r.notes {
			fmt.Fprintf(&b, "\n- %s on %s: %s", r.row, r.backend, n)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func seconds(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// outflowCell is the measured outflow against the configured rate: over
// the fault's span with the bound for an outflow row, over the load (and
// the load's rate) otherwise.
func outflowCell(r result) string {
	if r.bound > 0 {
		return fmt.Sprintf("%.1f/s of %.0f/s (%+.1f %%, bound ±%.0f %%)",
			r.outflow, r.rate, (r.outflow/r.rate-1)*100, r.bound*100)
	}
	return fmt.Sprintf("%.1f/s, load %.0f/s, rate %.0f/s", r.outflow, r.load, r.rate)
}

// writeResults writes the table to results/<UTC time>.md with the commit,
// the command and the machine, and returns the path.
func writeResults(table string) (string, error) {
	now := time.Now().UTC()
	commit, _ := exec.Command("git", "rev-parse", "HEAD").Output()
	dirty, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	state := ""
	if len(strings.TrimSpace(string(dirty))) > 0 {
		state = " (with uncommitted changes)"
	}
	mode := "make chaos"
	if short() {
		mode = "CHAOS_SHORT=1 make chaos"
	}
	load := "?"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) >= 3 {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	head := fmt.Sprintf("# Chaos run %s\n\ncommit %s%s, `%s`, %s, %d CPUs, load %s\n\n",
		now.Format(time.RFC3339), strings.TrimSpace(string(commit)), state, mode,
		runtime.Version(), runtime.NumCPU(), load)
	path := filepath.Join("results", now.Format("20060102T150405Z")+".md")
	if err := os.MkdirAll("results", 0o755); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(head+table), 0o644)
}
