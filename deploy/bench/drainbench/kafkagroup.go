package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/segmentio/kafka-go"
)

// groupTimeout bounds the wait for a row's consumer group to settle.
const groupTimeout = time.Minute

// startStableKafka starts n Kafka drainers with every tenant paused, waits
// until their consumer group is Stable with n members that each hold
// partitions, then resumes the tenants by rewriting each drainer's
// configuration (its config watcher reloads it within about 100 ms). So a
// throughput row measures draining, not the group's forming: without it
// the first drainer took every partition and each later one's join
// paused the group for a rebalance (about 1 s each) inside the measured
// time of a 10,000-job row. It returns how long the group took to settle
// from the first start (stated in the row's note).
func (b *bench) startStableKafka(ctx context.Context, name string, n int, c drainerConf) (fleet, time.Duration, error) {
	c.paused = true
	start := time.Now()
	f, err := startDrainers(b.bin, b.dir, name, n, c)
	if err != nil {
		return nil, 0, err
	}
	if err := waitGroupStable(ctx, c.brokers, c.group, n, f.failed); err != nil {
		f.stop(10 * time.Second)
		return nil, 0, err
	}
	settled := time.Since(start)
	c.paused = false
	for i, p := range f {
		c.listen = p.addr
		path := filepath.Join(b.dir, fmt.Sprintf("%s-%d.yaml", name, i))
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(c.yaml()), 0o644); err != nil {
			f.stop(10 * time.Second)
			return nil, 0, fmt.Errorf("drainbench: write %s: %w", tmp, err)
		}
		if err := os.Rename(tmp, path); err != nil {
			f.stop(10 * time.Second)
			return nil, 0, fmt.Errorf("drainbench: resume %s: %w", path, err)
		}
	}
	return f, settled, nil
}

// waitGroupStable polls DescribeGroups until group is Stable with n
// members, each assigned at least one partition.
func waitGroupStable(ctx context.Context, brokers []string, group string, n int, failed func() error) error {
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	deadline := time.Now().Add(groupTimeout)
	last := "not described yet"
	for time.Now().Before(deadline) {
		if err := failed(); err != nil {
			return err
		}
		res, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		switch {
		case err != nil:
			last = err.Error()
		case len(res.Groups) != 1:
			last = fmt.Sprintf("%d groups described", len(res.Groups))
		case res.Groups[0].Error != nil:
			last = res.Groups[0].Error.Error()
		default:
			g := res.Groups[0]
			assigned := 0
			for _, m := range g.Members {
				for _, t := range m.MemberAssignments.Topics {
					if len(t.Partitions) > 0 {
						assigned++
						break
					}
				}
			}
			if g.GroupState == "Stable" && len(g.Members) == n && assigned == n {
				return nil
			}
			last = fmt.Sprintf("state %s, %d members, %d with partitions", g.GroupState, len(g.Members), assigned)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("drainbench: consumer group %s not stable with %d members after %s: %s", group, n, groupTimeout, last)
}
