package testenv

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WaitFor polls cond every 10 ms until it holds, or fails the test naming
// what once timeout has passed.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Metric returns the value of the first series of the counter, gauge or
// untyped metric name in g whose labels include every one of labels (nil:
// any series), and whether there is one.
func Metric(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := make(map[string]string, len(m.GetLabel()))
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			default:
				return m.GetUntyped().GetValue(), true
			}
		}
	}
	return 0, false
}

// MetricValue is Metric's value, 0 when there is no such series.
func MetricValue(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := Metric(t, g, name, labels)
	return v
}

// HistogramMean returns the mean observation of the histogram name in g,
// over all its series (sum of sums ÷ sum of counts), and whether it has
// observations.
func HistogramMean(t testing.TB, g prometheus.Gatherer, name string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	var n uint64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetHistogram().GetSampleSum()
			n += m.GetHistogram().GetSampleCount()
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}
