// Package chaos is sluice's chaos suite: it runs the real ingest and drainer
// binaries against private Redis and Kafka servers, submits jobs over HTTP
// with client ids as package client does (retrying 429, 503 and connection
// errors with the same id), keeps a ledger of every answer, injects one fault
// per row into a real process (SIGKILL, SIGTERM, SIGSTOP of ingest, a
// drainer, the broker or redis-server), drains, and reports per row: jobs
// 202'd, delivered, lost (202'd, never delivered), duplicates (delivered more
// than once, by Sluice-Attempt), false 202s (202'd, never delivered, unknown
// to GET /v1/jobs/{id}), time to recover, and outflow against the configured
// rate.
//
// The suite is behind the build tag chaos:
//
//	make chaos                  # every row on both backends (~10 min)
//	CHAOS_SHORT=1 make chaos    # the short form make test runs (~3 min)
//	go test -tags chaos -run 'TestChaos/kafka/drainer_SIGKILL' -v ./deploy/chaos/
//
// It fails when a row loses a job, answers a false 202, or misses its outflow
// bound; the table is logged and written to results/<UTC time>.md.
//
// A row is a value (rows_test.go): a topology (stores, drainers, tenants and
// their rate), a load, and a fault function; a new topology (a Sentinel
// pair, a Kafka cluster) is a stores function that starts the servers and
// returns the config's redis and kafka sections.
package chaos
