package lua

import "github.com/prometheus/client_golang/prometheus"

var reloadsDesc = prometheus.NewDesc("sluice_script_reloads_total",
	"Script calls that Redis answered NOSCRIPT (restarted, flushed or failed over) and that were sent again as EVAL, by script.",
	[]string{"script"}, nil)

type collector struct{}

// Collector returns the collector of sluice_script_reloads_total{script}
// over every registered script (Script.Reloads). Each service registers it
// once.
func Collector() prometheus.Collector { return collector{} }

func (collector) Describe(ch chan<- *prometheus.Desc) { ch <- reloadsDesc }

func (collector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range All() {
		ch <- prometheus.MustNewConstMetric(reloadsDesc, prometheus.CounterValue, float64(s.Reloads()), s.name)
	}
}
