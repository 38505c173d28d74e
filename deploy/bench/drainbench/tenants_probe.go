package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's utime and stime
// (100 on Linux on every architecture Go supports).
const clockTicks = 100

// parseVmRSS reads VmRSS from /proc/<pid>/status's text, bytes.
func parseVmRSS(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 2 && f[1] == "kB" {
				if n, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return n * 1024, nil
				}
			}
			return 0, fmt.Errorf("drainbench: VmRSS %q: want \"<n> kB\"", strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("drainbench: no VmRSS line")
}

// parseStatCPU reads utime + stime from /proc/<pid>/stat's text, seconds.
// The fields are counted after the command's closing bracket, as the
// command itself may hold spaces and brackets.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("drainbench: /proc stat without a command")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3 (state); utime is 14, stime 15
	if len(f) < 13 {
		return 0, fmt.Errorf("drainbench: /proc stat with %d fields after the command", len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("drainbench: /proc stat utime %q stime %q", f[11], f[12])
	}
	return float64(u+s) / clockTicks, nil
}

// procRSS is pid's resident memory now, bytes.
func procRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("drainbench: %w", err)
	}
	return parseVmRSS(string(b))
}

// procCPU is pid's CPU time so far (user + system), seconds.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("drainbench: %w", err)
	}
	return parseStatCPU(string(b))
}

// parseMetric finds an unlabelled sample of name in Prometheus text
// exposition.
func parseMetric(text, name string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
				return x, true
			}
		}
	}
	return 0, false
}

// scrape GETs http://addr/path and returns the body, failing on a status
// other than 200.
func scrape(ctx context.Context, addr, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return string(b), err
}

// waitReady polls the drainer's /readyz on addr until it answers 200 and
// returns how long that took from start; it fails after timeout or when
// failed reports an error (the drainer died).
func waitReady(ctx context.Context, addr string, start time.Time, timeout time.Duration, failed func() error) (time.Duration, error) {
	for {
		if _, err := scrape(ctx, addr, "/readyz"); err == nil {
			return time.Since(start), nil
		} else if time.Since(start) > timeout {
			return 0, fmt.Errorf("drainer not ready %s after its start: %w", timeout, err)
		}
		if err := failed(); err != nil {
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redisInfo reads numeric fields of one INFO section; missing ones are 0.
func redisInfo(ctx context.Context, rdb *redis.Client, section string, fields ...string) ([]float64, error) {
	info, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("drainbench: INFO %s: %w", section, err)
	}
	out := make([]float64, len(fields))
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		for i, f := range fields {
			if k == f {
				out[i], _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return out, nil
}
