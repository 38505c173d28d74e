package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/deploy/bench/drainresult"
)

// benches holds `go test -bench` results: benchmark name (without its
// -GOMAXPROCS suffix) → unit → every value reported for it (one per run
// with -count > 1).
type benches map[string]map[string][]float64

var procSuffix = regexp.MustCompile(`-\d+$`)

// parseGoBench reads `go test -bench` output, keeping the result lines
// ("BenchmarkX/sub-2  N  v unit  v unit ...") and ignoring everything else.
func parseGoBench(r io.Reader, into benches) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil { // the iteration count
			continue
		}
		name := procSuffix.ReplaceAllString(f[0], "")
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			if into[name] == nil {
				into[name] = map[string][]float64{}
			}
			into[name][f[i+1]] = append(into[name][f[i+1]], v)
		}
	}
}

// get returns the median of the values of unit reported by benchmark name.
func (b benches) get(name, unit string) (float64, bool) {
	vs := b[name][unit]
	return drainresult.Median(vs), len(vs) > 0
}

// kafkaPerf is deploy/bench/kafka-perf.sh's side-by-side result.
type kafkaPerf struct {
	sluice, kafka       float64 // records/s
	sluiceP99, kafkaP99 float64 // ms; 0 when not printed
	ok                  bool    // both records/s found
	// bare is sluice's producer without the post-ack Redis write
	// (BenchmarkEnqueue/kafka_no_state), bareOK when it was printed.
	bare, bareP99 float64
	bareOK        bool
}

var p99Re = regexp.MustCompile(`p99 latency ([0-9.]+) ms`)

// parseKafkaPerf reads kafka-perf.sh's output: the rows "sluice
// kafkaq.Producer.Enqueue <records/s> <MB/s> (... p99 latency <ms> ms)",
// "sluice-without-state-write <records/s> <MB/s> (...)" and
// "kafka-producer-perf-test <records/s> <MB/s> (...)".
func parseKafkaPerf(r io.Reader) kafkaPerf {
	var k kafkaPerf
	var gotS, gotK bool
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		p99 := 0.0
		if m := p99Re.FindStringSubmatch(line); m != nil {
			p99, _ = strconv.ParseFloat(m[1], 64)
		}
		switch {
		case len(f) >= 3 && f[0] == "sluice" && f[1] == "kafkaq.Producer.Enqueue":
			if v, err := strconv.ParseFloat(f[2], 64); err == nil {
				k.sluice, k.sluiceP99, gotS = v, p99, true
			}
		case len(f) >= 2 && f[0] == "sluice-without-state-write":
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				k.bare, k.bareP99, k.bareOK = v, p99, true
			}
		case len(f) >= 2 && f[0] == "kafka-producer-perf-test":
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				k.kafka, k.kafkaP99, gotK = v, p99, true
			}
		}
	}
	k.ok = gotS && gotK
	return k
}
