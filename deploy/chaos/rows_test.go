//go:build chaos

package chaos

import "time"

// load is a row's submissions: prefill jobs per tenant submitted in batches
// before the drainers start (a deep backlog), then perSecond jobs a second
// over all tenants from the drainers' start, for before the fault and
// after it has ended.
type load struct {
	perSecond     float64
	prefill       int
	before, after time.Duration
}

// row is one line of the table: a fault on a topology under a load, run on
// each of backends. bound > 0 makes the row an outflow row: outflow over
// the fault's span must be within bound (a fraction) of the configured
// rate. short rows are the ones CHAOS_SHORT=1 runs, with shortLoad.
type row struct {
	name      string
	backends  []string
	topo      topology
	load      load
	shortLoad load
	fault     faultFunc
	bound     float64
	short     bool
}

var both = []string{"redis", "kafka"}

// faultTopo is the topology of the fault rows: two drainers, two tenants
// at 50 jobs/s each (the load, 40/s, never builds a backlog).
func faultTopo(privateKafka bool) topology {
	return topology{stores: standalone(privateKafka), drainers: 2, tenants: 2, rate: 50}
}

var (
	faultLoad      = load{perSecond: 40, before: 8 * time.Second, after: 10 * time.Second}
	shortFaultLoad = load{perSecond: 40, before: 4 * time.Second, after: 6 * time.Second}
)

// Outflow rows (issue 10 requirement 5): three drainers, three tenants at
// 40 jobs/s (120/s in all), each with a backlog deeper than the run drains.
const outflowRate = 40

// crashCapacity is the bucket of the SIGKILL row's tenants: 0, the default
// max(1, rate), i.e. one second of outflow. On Kafka a SIGKILLed drainer
// used to stall the whole group until its session expired (eager
// rebalance), which a 1-s bucket cannot make up afterwards (-29 % at a 6-s
// session); a restarted drainer now removes its killed predecessor from
// the group (kafka.instance_id, queue/kafkaq member.go), so the row runs
// with the shipped bucket.
const crashCapacity = 0

func outflowTopo(capacity float64) topology {
	return topology{stores: standalone(false), drainers: 3, tenants: 3, rate: outflowRate, capacity: capacity}
}

// outflowLoad prefills a tenant with what it drains in warm + run + 15 s.
func outflowLoad(run time.Duration) load {
	warm := 5 * time.Second
	return load{prefill: int(outflowRate * (warm + run + 15*time.Second).Seconds()), before: warm}
}

// rows are the suite. A new topology is one more storesFunc (ha_test.go
// has the Sentinel and the 3-node Kafka cluster) and a faultFunc.
var rows = []row{
	{name: "drainer SIGKILL", backends: both, topo: faultTopo(false), load: faultLoad,
		shortLoad: shortFaultLoad, fault: drainerKill, short: true},
	{name: "drainer SIGTERM", backends: both, topo: faultTopo(false), load: faultLoad,
		shortLoad: shortFaultLoad, fault: drainerTerm},
	{name: "ingest SIGKILL", backends: both, topo: faultTopo(false), load: faultLoad,
		shortLoad: shortFaultLoad, fault: ingestKill, short: true},
	{name: "broker SIGKILL", backends: both, topo: faultTopo(true), load: faultLoad,
		shortLoad: shortFaultLoad, fault: brokerKill, short: true},
	{name: "broker SIGSTOP 5s", backends: both, topo: faultTopo(true), load: faultLoad,
		shortLoad: shortFaultLoad, fault: brokerStop},
	{name: "broker SIGTERM", backends: both, topo: faultTopo(true), load: faultLoad,
		shortLoad: shortFaultLoad, fault: brokerTerm},
	{name: "redis-server SIGKILL", backends: []string{"kafka"}, topo: faultTopo(false), load: faultLoad,
		shortLoad: shortFaultLoad, fault: redisKill, short: true},
	{name: "rolling restart (SIGTERM)", backends: both, topo: outflowTopo(0),
		load: outflowLoad(25 * time.Second), fault: rollingRestart(5 * time.Second), bound: 0.10},
	{name: "drainer SIGKILL every 15s", backends: both, topo: outflowTopo(crashCapacity),
		load: outflowLoad(60 * time.Second), fault: killEvery(15*time.Second, 4), bound: 0.25},
	{name: "Sentinel failover (wait_replicas 1)", backends: []string{"redis"}, topo: haTopo(sentinelStores),
		load: faultLoad, shortLoad: shortFaultLoad, fault: sentinelFailover},
	{name: "Kafka leader SIGKILL (3 brokers)", backends: []string{"kafka"}, topo: haTopo(clusterStores),
		load: faultLoad, shortLoad: shortFaultLoad, fault: leaderKill},
	{name: "Kafka controller SIGKILL (3 brokers)", backends: []string{"kafka"}, topo: haTopo(clusterStores),
		load: faultLoad, shortLoad: shortFaultLoad, fault: controllerKill},
}
