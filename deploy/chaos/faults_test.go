//go:build chaos

package chaos

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// span is when a fault took effect (at) and when the system was whole
// again (end: the process restarted, the broker resumed); events are the
// instants of every fault it injected (at alone for a single one).
type span struct {
	at, end time.Time
	events  []time.Time
}

// once is the span of a single fault.
func once(at time.Time) span { return span{at: at, end: time.Now(), events: []time.Time{at}} }

// faultFunc injects a row's fault into st, restores what it broke, and
// returns the span.
type faultFunc func(st *stack) span

// restartAfter ends process p with end, waits down, starts it again.
func restartAfter(p func(*stack) *proc, end func(*proc), down time.Duration) faultFunc {
	return func(st *stack) span {
		pr := p(st)
		end(pr)
		at := time.Now()
		time.Sleep(down)
		pr.start()
		return once(at)
	}
}

func firstDrainer(st *stack) *proc { return st.drainers[0] }
func ingestProc(st *stack) *proc   { return st.ingest }

var (
	drainerKill = restartAfter(firstDrainer, (*proc).kill, 2*time.Second)
	drainerTerm = restartAfter(firstDrainer, (*proc).term, 2*time.Second)
	ingestKill  = restartAfter(ingestProc, (*proc).kill, time.Second)
)

// redisKill SIGKILLs the row's Redis (with its AOF) and starts it again
// after 2 s.
func redisKill(st *stack) span {
	st.srv.redis.Kill()
	at := time.Now()
	time.Sleep(2 * time.Second)
	st.srv.redis.Start()
	return once(at)
}

// brokerKill, brokerTerm and brokerStop fault what holds the jobs: the
// Kafka broker on the Kafka backend, the Redis on the Redis backend. The
// Kafka broker restarts at once (its start takes several seconds), Redis
// after 2 s; a SIGSTOPped one is resumed after 5 s.
func brokerKill(st *stack) span {
	if st.srv.kafka == nil {
		return redisKill(st)
	}
	st.srv.kafka.Kill()
	at := time.Now()
	st.srv.kafka.Start()
	return once(at)
}

func brokerTerm(st *stack) span {
	if st.srv.kafka == nil {
		st.srv.redis.Stop()
		at := time.Now()
		time.Sleep(2 * time.Second)
		st.srv.redis.Start()
		return once(at)
	}
	st.srv.kafka.Stop()
	at := time.Now()
	st.srv.kafka.Start()
	return once(at)
}

func brokerStop(st *stack) span {
	pause, resume := st.srv.redis.Pause, st.srv.redis.Resume
	if k := st.srv.kafka; k != nil {
		dir := filepath.Dir(k.LogPath())
		pause = func() { signalPidFile(st, filepath.Join(dir, "kafka.pid"), syscall.SIGSTOP) }
		resume = func() { signalPidFile(st, filepath.Join(dir, "kafka.pid"), syscall.SIGCONT) }
	}
	pause()
	at := time.Now()
	time.Sleep(5 * time.Second)
	resume()
	return once(at)
}

// signalPidFile sends sig to the process whose pid the file holds (the
// broker's, written by services.sh kafka-start).
func signalPidFile(st *stack, path string, sig syscall.Signal) {
	b, err := os.ReadFile(path)
	if err != nil {
		st.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		st.t.Fatalf("%s: %v", path, err)
	}
	if err := syscall.Kill(pid, sig); err != nil {
		st.t.Fatalf("signal %v to %d: %v", sig, pid, err)
	}
}

// rollingRestart SIGTERMs each drainer in turn, starts it again and waits
// gap before the next; the span ends gap after the last restart.
func rollingRestart(gap time.Duration) faultFunc {
	return func(st *stack) span {
		at := time.Now()
		for _, d := range st.drainers {
			d.term()
			d.start()
			time.Sleep(gap)
		}
		return once(at)
	}
}

// killEvery SIGKILLs a drainer (each in turn) every period, n times,
// starting it again at once; the span is n periods.
func killEvery(period time.Duration, n int) faultFunc {
	return func(st *stack) span {
		at := time.Now()
		for i := range n {
			d := st.drainers[i%len(st.drainers)]
			d.kill()
			d.start()
			time.Sleep(time.Until(at.Add(time.Duration(i+1) * period)))
		}
		return once(at)
	}
}
