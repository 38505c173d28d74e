package kafkaq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/queue/queuetest"
)

// TestKafkaProducerBacklogRedisDown: after Kafka's ack, a dead Redis costs
// the backlog counter, not the job: Enqueue returns nil and the error is
// counted.
func TestKafkaProducerBacklogRedisDown(t *testing.T) {
	t.Parallel()
	brokers := testenv.KafkaBrokers(t)
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	cfg := kafkaTestConfig(t, brokers, 1)
	p := newTestKafkaProducer(t, cfg, rdb)
	srv.Stop()
	if err := p.Enqueue(context.Background(), []queue.Envelope{queuetest.Job("t", "j1", 1)}); err != nil {
		t.Fatalf("Enqueue with Redis down = %v, want nil (the job is on Kafka)", err)
	}
	if got := testutil.ToFloat64(p.sender.backlog.errs); got != 1 {
		t.Errorf(`sluice_redis_errors_total{op="backlog_incr"} = %v, want 1`, got)
	}
	if got := readTopic(t, brokers, cfg.Topic, 1); len(got[0]) != 1 {
		t.Errorf("topic holds %d messages, want 1", len(got[0]))
	}
}

// TestKafkaProducerBrokerDown takes a private broker away twice, stopped
// (connections refused) and frozen with SIGSTOP (connections hang), while
// writers keep enqueueing. Every Enqueue that fails wraps queue.ErrUnavailable and
// returns within the produce timeout; after the broker is back Enqueue
// succeeds again; and every job that Enqueue acknowledged is on the topic.
func TestKafkaProducerBrokerDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private Kafka broker (about 20s)")
	}
	k := testenv.StartKafka(t)
	cfg := kafkaTestConfig(t, k.Brokers(), 2)
	cfg.ProduceTimeout = time.Second
	limit := cfg.ProduceTimeout + 500*time.Millisecond
	p := newTestKafkaProducer(t, cfg, nil)
	ctx := context.Background()
	if err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("t", "before", 1)}); err != nil {
		t.Fatal(err)
	}
	pause := func(sig syscall.Signal) func() {
		return func() {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(k.LogPath()), "kafka.pid"))
			if err != nil {
				t.Fatalf("pid of the private broker: %v", err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid of the private broker: %v", err)
			}
			if err := syscall.Kill(pid, sig); err != nil {
				t.Fatalf("signal %v to broker %d: %v", sig, pid, err)
			}
			if sig == syscall.SIGSTOP {
				waitStopped(t, pid)
			}
		}
	}

	var mu sync.Mutex
	acked := []string{"before"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("load-%d-%d", w, i)
				start := time.Now()
				err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job(fmt.Sprintf("t%d", w), id, 1)})
				if took := time.Since(start); took > limit {
					t.Errorf("load: Enqueue took %v, want < %v", took, limit)
				}
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				case !errors.Is(err, queue.ErrUnavailable):
					t.Errorf("load: Enqueue = %v, want nil or queue.ErrUnavailable", err)
				}
			}
		})
	}

	for _, fault := range []struct {
		name          string
		down, recover func()
	}{
		{"stopped", k.Stop, k.Start},
		{"paused", pause(syscall.SIGSTOP), pause(syscall.SIGCONT)},
	} {
		fault.down()
		for i := range 3 {
			start := time.Now()
			err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("t", fmt.Sprintf("%s-%d", fault.name, i), 1)})
			took := time.Since(start)
			if err == nil {
				// Checked against the topic below, with the other acks.
				mu.Lock()
				acked = append(acked, fmt.Sprintf("%s-%d", fault.name, i))
				mu.Unlock()
			}
			if !errors.Is(err, queue.ErrUnavailable) {
				t.Errorf("%s: Enqueue = %v, want an error wrapping queue.ErrUnavailable", fault.name, err)
				continue
			}
			if took > limit {
				t.Errorf("%s: Enqueue took %v to fail, want < %v", fault.name, took, limit)
			}
			t.Logf("%s: Enqueue failed after %v: %v", fault.name, took.Round(time.Millisecond), err)
		}
		fault.recover()
		// The writer's partition goroutines may still be retrying batches
		// of the failed calls; recovery is measured, not asserted to the ms.
		start := time.Now()
		for {
			err := p.Enqueue(ctx, []queue.Envelope{queuetest.Job("t", "after-"+fault.name, 1)})
			if err == nil {
				t.Logf("%s: Enqueue succeeds %v after the broker is back", fault.name, time.Since(start).Round(time.Millisecond))
				mu.Lock()
				acked = append(acked, "after-"+fault.name)
				mu.Unlock()
				break
			}
			if !errors.Is(err, queue.ErrUnavailable) {
				t.Fatalf("%s: Enqueue after recovery = %v, want nil or queue.ErrUnavailable", fault.name, err)
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("%s: Enqueue still failing 30s after recovery: %v", fault.name, err)
			}
			time.Sleep(100 * time.Millisecond) // between retries, not waiting for a rate
		}
	}
	close(stop)
	wg.Wait()

	onTopic := map[string]bool{}
	for _, msgs := range readTopic(t, k.Brokers(), cfg.Topic, cfg.Partitions) {
		for _, m := range msgs {
			onTopic[header(m, HeaderJobID)] = true
		}
	}
	var missing []string
	for _, id := range acked {
		if !onTopic[id] {
			missing = append(missing, id)
		}
	}
	t.Logf("%d jobs acknowledged, %d messages on the topic", len(acked), len(onTopic))
	if len(missing) > 0 {
		t.Errorf("%d acknowledged jobs are not on the topic: %v", len(missing), missing)
	}
}

// waitStopped waits until every thread of process pid is stopped (state T
// in /proc/pid/task/*/stat): kill returns before a running thread on
// another CPU has taken the signal.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(tasks) == 0 {
			t.Fatalf("threads of broker %d: %v", pid, err)
		}
		running := 0
		for _, f := range tasks {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the thread exited
			}
			// The state follows the command name, which is in parentheses.
			if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
				running++
			}
		}
		if running == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d: %d of %d threads still not stopped 5s after SIGSTOP", pid, running, len(tasks))
		}
		time.Sleep(time.Millisecond)
	}
}
