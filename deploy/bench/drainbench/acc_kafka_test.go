package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAccCases: each rate and worker count runs BullMQ's row once and
// sluice's once per backend of BENCH_ACC_BACKENDS, in the order it lists
// them (default redis then kafka, in the quick subset too).
func TestAccCases(t *testing.T) {
	names := func(cs []accCase) []string {
		var out []string
		for _, c := range cs {
			out = append(out, fmt.Sprintf("%s/%s/r%g/n%d", c.system, c.backend, c.rate, c.workers))
		}
		return out
	}
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"quick defaults", map[string]string{"BENCH_QUICK": "1", "BENCH_RATES": "10", "BENCH_WORKERS": "1,3"}, []string{
			"bullmq/redis/r10/n1", "sluice/redis/r10/n1", "sluice/kafka/r10/n1",
			"bullmq/redis/r10/n3", "sluice/redis/r10/n3", "sluice/kafka/r10/n3",
		}},
		{"full defaults, sluice only", map[string]string{"BENCH_SYSTEMS": "sluice", "BENCH_WORKERS": "8"}, []string{
			"sluice/redis/r10/n8", "sluice/kafka/r10/n8", "sluice/redis/r100/n8", "sluice/kafka/r100/n8",
			"sluice/redis/r1000/n8", "sluice/kafka/r1000/n8",
		}},
		{"kafka first, repeated", map[string]string{"BENCH_ACC_BACKENDS": "kafka, redis,kafka", "BENCH_RATES": "100", "BENCH_WORKERS": "1"}, []string{
			"bullmq/redis/r100/n1", "sluice/kafka/r100/n1", "sluice/redis/r100/n1",
		}},
		{"Kafka only, BullMQ only", map[string]string{"BENCH_ACC_BACKENDS": "kafka", "BENCH_SYSTEMS": "bullmq", "BENCH_RATES": "100", "BENCH_WORKERS": "3"}, []string{
			"bullmq/redis/r100/n3",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := loadOptions(func(k string) string { return tc.env[k] }, "/repo")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, names(accCases(o))); diff != "" {
				t.Errorf("accCases (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := loadOptions(func(k string) string { return map[string]string{"BENCH_ACC_BACKENDS": "redis,nats"}[k] }, "/repo"); err == nil {
		t.Error("BENCH_ACC_BACKENDS=redis,nats: nil error, want one")
	}
	a, b := accCase{"sluice", "redis", 100, 3}, accCase{"sluice", "kafka", 100, 3}
	if a.name("x") == b.name("x") {
		t.Errorf("the Redis and Kafka rows share the name %q", a.name("x"))
	}
}

// TestAccuracyReportBackend: the accuracy table and the JSON name each
// row's backend, and a Kafka row's note says what its cmds/job count.
func TestAccuracyReportBackend(t *testing.T) {
	o := &options{parts: map[string]bool{"accuracy": true}}
	r := &report{o: o, acc: []accRow{
		{system: "sluice", backend: "redis", rate: 10, workers: 1, capacity: 10, res: accuracy{Jobs: 50, Rate: 10, MaxWindow: 20}},
		{system: "sluice", backend: "kafka", rate: 10, workers: 1, capacity: 10, note: kafkaCmdsNote, res: accuracy{Jobs: 50, Rate: 10, MaxWindow: 20}},
	}}
	md := r.markdown()
	for _, s := range []string{"| system | backend | target /s |", "| sluice | redis | 10 | 1 |", "| sluice | kafka | 10 | 1 |",
		"- sluice kafka rate 10 × 1: Redis cmds/job count Redis commands only"} {
		if !strings.Contains(md, s) {
			t.Errorf("report lacks %q:\n%s", s, md)
		}
	}
	var got []string
	for _, a := range r.result().Accuracy {
		got = append(got, a.Backend)
	}
	if diff := cmp.Diff([]string{"redis", "kafka"}, got); diff != "" {
		t.Errorf("JSON backends (-want +got):\n%s", diff)
	}
}
