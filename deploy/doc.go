// Package deploy holds sluice's deployment artifacts and the tests that keep
// them honest; it has no Go API.
//
//   - grafana/sluice.json: the dashboard; grafana/provisioning: its data
//     source and provider for docker-compose.yml.
//   - prometheus/: scrape configs for the local stack (prometheus.yml) and
//     for docker-compose (prometheus.compose.yml), alert rules (rules.yml)
//     and their unit tests (rules_test.yml).
//   - k8s/: kustomize base (ingest, drainer, ConfigMap, PDBs) and
//     overlays/local, a self-contained example.
//   - local/ and bench/: the local services harness and the benchmarks
//     (their own docs).
//
// The tests (go test ./deploy/) check that every metric a dashboard query or
// an alert names is one the Go source defines, run promtool on the rules and
// configs, render the kustomizations with kubectl when it is installed, and
// check docker-compose.yml against the configuration keys and the other
// files. promtool comes with Debian's prometheus package; without it the test
// fails unless SLUICE_SKIP_PROMTOOL=1.
package deploy
