# sluice's developer and CI entry points. The tests run against real Redis,
# Redis Cluster and Kafka servers that deploy/local/services.sh starts on
# 127.0.0.1 (no Docker); `bash deploy/local/services.sh help` tells more.
#
#   make test       services up, the test tools, make lint-api, go vet, race tests of every package,
#                   each fuzz target for CI_FUZZTIME, then the short chaos suite (make chaos-short)
#   make chaos      services up, the chaos suite (deploy/chaos, build tag chaos): every fault row on
#                   both backends, ~15 min; the table goes to stdout and deploy/chaos/results/
#   make chaos-short  its short form (CHAOS_SHORT=1: 7 rows, shorter loads, ~3 min)
#   make bench      services up, benchmarks (BENCH_PKGS, BENCH, BENCHTIME), then BENCH_SCRIPTS, then bench-drain,
#                   then deploy/bench/summary: one table of every ratio of issue 11 and the commit
#                   (stdout and deploy/bench/results/summary-<UTC>.md); BENCH_QUICK=1 for the quick subset
#   make bench-drain  drain accuracy, throughput and head-of-line against BullMQ, and cost as
#                   tenants grow (deploy/bench/drainbench, ~40 min; BENCH_QUICK=1 for the ~6 min subset)
#   make run        services up, then the demo stack (deploy/local/run.sh): demosink, ingest,
#                   two drainers, demoload, Prometheus when installed; RUN_CONFIG, RUN_DURATION
#                   (seconds, 0 = until Ctrl-C)
#   make fuzz       services up, each Go fuzz target for FUZZTIME (default 60s; see FUZZ_TARGETS)
#   make lint       gofmt and go vet
#   make lint-api   Redocly's linter on api/openapi.yaml (rules: redocly.yaml); fails on any error
#   make services / services-down / services-status

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

GO ?= go
SERVICES := bash deploy/local/services.sh
# The SLUICE_TEST_* addresses of the running services, for the tests; without
# SLUICE_KAFKA_BROKERS, which services.sh reads as a node count
# (SLUICE_KAFKA_BROKERS=3 make test) and config as the kafka.brokers list.
TEST_ENV = env -u SLUICE_KAFKA_BROKERS $$($(SERVICES) env)

PKGS ?= ./...
TEST_FLAGS ?= -race -count=1 -timeout 15m

# BENCH_QUICK=1 runs only the benchmarks the summary reads (and drainbench's
# quick subset).
ifeq ($(BENCH_QUICK),1)
BENCH_PKGS ?= ./limits ./ingest
BENCH ?= ^(BenchmarkAdmitVsRedisRate|BenchmarkAdmitLatency|BenchmarkIngest)$$
# Rounds of the Go benchmarks: go test runs BENCH_COUNT times in a row
# (not -count, which repeats each sub-benchmark before the next), so the
# ingest sub-benchmarks alternate and the summary's ingest ratios are the
# median of the rounds' paired ratios. Each run gets its round number in
# SLUICE_BENCH_ROUND; BenchmarkIngest runs its sub-benchmarks in the
# reverse order in even rounds, so an even count balances the two orders.
BENCH_COUNT ?= 4
endif
BENCH_PKGS ?= ./...
BENCH ?= .
BENCHTIME ?= 1s
BENCH_COUNT ?= 1
# One bench run's outputs: go test -bench's (gotest.txt), each script's
# (<name>.txt) and drainbench's results (drain.json), which
# deploy/bench/summary reads at the end.
BENCH_STAMP := $(shell date -u +%Y%m%dT%H%M%SZ)
BENCH_RUN ?= .cache/bench/$(BENCH_STAMP)
# Extra benchmark programs, run after the Go benchmarks with the SLUICE_TEST_*
# environment set: every deploy/bench/*.sh unless BENCH_SCRIPTS says otherwise
# (BENCH_SCRIPTS= runs none).
BENCH_SCRIPTS ?= $(wildcard deploy/bench/*.sh)

# Go native fuzz targets, as package:Target, run one at a time by
# deploy/local/fuzz.sh: each for FUZZTIME (make fuzz) or CI_FUZZTIME (make
# test), with FUZZ_PARALLEL workers. An input that fails is written to the
# package's testdata/fuzz/<Target>/, which plain go test then runs as a
# regression case.
FUZZTIME ?= 60s
CI_FUZZTIME ?= 5s
FUZZ_PARALLEL ?= 2
FUZZ_TARGETS ?= ./ingest:FuzzJob ./ingest:FuzzJobBatch ./tenants:FuzzSpecPatch ./limits:FuzzAdmit ./internal/strictjson:FuzzCheck

# Redocly's CLI (npm @redocly/cli, pinned in services.sh, installed into
# .cache/tools/redocly) with the recommended rules of redocly.yaml; it exits
# non-zero on an error, not on a warning.
LINT_API = $(SERVICES) redocly lint --config redocly.yaml api/openapi.yaml

RUN_CONFIG ?= configs/sluice.local.yaml
RUN_DURATION ?= 0

# The chaos suite's go test flags; CHAOS_RUN picks rows (e.g.
# CHAOS_RUN='TestChaos/kafka/' for the Kafka rows). The suite builds and runs
# the ingest and drainer binaries itself, so it runs without -race.
CHAOS_RUN ?= TestChaos
CHAOS_FLAGS ?= -count=1 -v -timeout 60m
CHAOS_TEST = $(GO) test -tags chaos -run '$(CHAOS_RUN)' $(CHAOS_FLAGS) ./deploy/chaos/

.PHONY: services services-down services-status test fuzz bench bench-drain run lint lint-api chaos chaos-short

services:
	$(SERVICES) up

services-down:
	$(SERVICES) down

services-status:
	$(SERVICES) status

test: services
	$(SERVICES) tools
	$(LINT_API)
	$(GO) vet $(PKGS)
	$(TEST_ENV) $(GO) test $(TEST_FLAGS) $(PKGS)
	$(TEST_ENV) GO=$(GO) FUZZTIME=$(CI_FUZZTIME) FUZZ_PARALLEL=$(FUZZ_PARALLEL) bash deploy/local/fuzz.sh $(FUZZ_TARGETS)
	$(TEST_ENV) CHAOS_SHORT=1 $(CHAOS_TEST)

# The chaos suite fails when a row lost a 202'd job, answered a false 202 or
# missed its outflow bound (deploy/chaos/doc.go).
chaos: services
	$(TEST_ENV) $(CHAOS_TEST)

chaos-short: services
	$(TEST_ENV) CHAOS_SHORT=1 $(CHAOS_TEST)

fuzz: services
	$(TEST_ENV) GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZ_PARALLEL=$(FUZZ_PARALLEL) bash deploy/local/fuzz.sh $(FUZZ_TARGETS)

# A failed part is noted and the next one runs, so the summary still comes
# (its rows say "not run"); then the target fails.
bench: services
	mkdir -p $(BENCH_RUN) && rm -f $(BENCH_RUN)/failed
	for i in $$(seq $(BENCH_COUNT)); do \
		$(TEST_ENV) SLUICE_BENCH_ROUND=$$i $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) $(BENCH_PKGS) 2>&1 \
		| tee -a $(BENCH_RUN)/gotest.txt || echo "go test -bench failed" >>$(BENCH_RUN)/failed; done
	for s in $(BENCH_SCRIPTS); do echo "== $$s"; \
		$(TEST_ENV) bash "$$s" 2>&1 | tee "$(BENCH_RUN)/$$(basename "$$s" .sh).txt" || echo "$$s failed" >>$(BENCH_RUN)/failed; done
	$(MAKE) bench-drain BENCH_JSON=$(abspath $(BENCH_RUN))/drain.json || echo "bench-drain failed" >>$(BENCH_RUN)/failed
	$(GO) run ./deploy/bench/summary -in $(BENCH_RUN) -command '$(if $(filter 1,$(BENCH_QUICK)),BENCH_QUICK=1 )make bench'
	@if [[ -s $(BENCH_RUN)/failed ]]; then cat $(BENCH_RUN)/failed; exit 1; fi

# The BullMQ peer is installed from its lock file on every run (npm ci); the
# report goes to stdout and deploy/bench/results/ (BENCH_* variables: see
# deploy/bench/drainbench/main.go).
bench-drain: services
	cd deploy/bench/bullmq && npm ci --no-audit --no-fund
	$(TEST_ENV) BENCH_COMMAND='make bench-drain' BENCH_JSON='$(BENCH_JSON)' $(GO) run ./deploy/bench/drainbench

run: services
	RUN_SERVICES=0 RUN_CONFIG='$(RUN_CONFIG)' RUN_DURATION='$(RUN_DURATION)' bash deploy/local/run.sh

lint:
	@files=$$(gofmt -l $$(find . -name '*.go' -not -path './.cache/*' -not -path './.git/*')); \
	if [[ -n $$files ]]; then echo "gofmt -l: these files need gofmt -w:"; echo "$$files"; exit 1; fi
	$(GO) vet $(PKGS)

lint-api:
	$(LINT_API)
