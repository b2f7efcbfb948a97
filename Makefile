# Sundial's Makefile. `make help` lists the targets; each target's comment after
# "##" is its help line.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO    ?= go
STACK := deploy/local/stack.sh
# Pinned tool versions.
GOLANGCI_LINT_VERSION := v2.15.0
# Where test logs go; git-ignored.
OUT   ?= .out

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: dev
dev: ## run the pipeline in one process on embedded backends (no install needed)
	$(GO) run ./cmd/sundial dev

.PHONY: test
test: stack-up ## start the real stack, vet, check generated code, run every test with -race against it
	$(GO) vet ./...
	$(GO) vet -tags observability ./deploy/
	$(MAKE) --no-print-directory check-generate
	$(MAKE) --no-print-directory check-rules
	@mkdir -p $(OUT)
	@source <($(STACK) env) && echo "backends: kafka=$$SUNDIAL_KAFKA_BROKERS cassandra=$$SUNDIAL_CASSANDRA_HOSTS redis=$$SUNDIAL_REDIS_ADDR" && \
	  $(GO) test -race -count=1 -timeout 20m -v ./... > $(OUT)/test.log 2>&1; rc=$$?; \
	  grep -E '^(ok|FAIL|---|panic:|\?)' $(OUT)/test.log | grep -v -- '--- PASS' || true; \
	  echo "full log: $(OUT)/test.log"; exit $$rc

.PHONY: test-unit
test-unit: ## fast tests only: no backends, integration tests skip under -short
	$(GO) test -short -count=1 ./...

.PHONY: lint
lint: ## go vet and golangci-lint (config in .golangci.yml)
	$(GO) vet ./...
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run ./...

.PHONY: generate
generate: ## regenerate protobuf code with the pinned buf and protoc-gen-go
	cd proto && $(GO) tool buf generate

.PHONY: check-generate
check-generate: generate ## fail when generated code differs from what is committed
	@git diff --exit-code -- proto || { echo "generated code is stale: run 'make generate' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- proto)" || { echo "generated files are not committed:" >&2; git status --porcelain -- proto >&2; exit 1; }

.PHONY: lint-proto
lint-proto: ## lint the protobuf schema with the pinned buf (rules in proto/buf.yaml)
	cd proto && $(GO) tool buf lint

# What proto-breaking compares the working tree with: the proto directory of
# the main branch. Override for a fork or a CI checkout, e.g.
# make proto-breaking PROTO_BREAKING_AGAINST='../.git#branch=origin/main,subdir=proto'
PROTO_BREAKING_AGAINST ?= ../.git\#branch=main,subdir=proto

.PHONY: proto-breaking
proto-breaking: ## fail on wire-incompatible protobuf changes against the main branch
	cd proto && $(GO) tool buf breaking --against '$(PROTO_BREAKING_AGAINST)'

.PHONY: stack-up
stack-up: ## download (once) and start Kafka, Cassandra and Redis on 127.0.0.1
	$(STACK) up

.PHONY: stack-down
stack-down: ## stop the local stack; no process is left behind
	$(STACK) down

.PHONY: stack-status
stack-status: ## show each backend's state
	$(STACK) status

.PHONY: stack-logs
stack-logs: ## tail the backends' logs
	$(STACK) logs

.PHONY: stack-reset
stack-reset: ## stop the local stack and delete its data and logs (downloads are kept)
	$(STACK) reset

.PHONY: migrate
migrate: stack-up ## create the keyspace, tables and topics on the local stack
	source <($(STACK) env) && $(GO) run ./cmd/sundial migrate

.PHONY: bench
bench: stack-up ## run a bench scenario on the real stack: make bench SCENARIO=steady
	source <($(STACK) env) && $(GO) run ./cmd/sundial bench $(or $(SCENARIO),steady)

# promtool comes with Prometheus (Debian: apt-get install prometheus).
PROMTOOL ?= promtool

.PHONY: check-rules
check-rules: ## check the Prometheus config and alert rules and run the rules' unit tests (promtool)
	@command -v $(PROMTOOL) >/dev/null || { echo "promtool not found: apt-get install -y prometheus" >&2; exit 1; }
	$(PROMTOOL) check rules deploy/prometheus/rules/*.yml
	$(PROMTOOL) check config deploy/prometheus/prometheus.yml
	$(PROMTOOL) test rules deploy/prometheus/tests/*.yml

# The end-to-end scenario of test-observability (deploy/scenario_test.go,
# behind the observability build tag so that `make test` neither builds nor
# skips it):
# migrate, start a registry, a dispatcher, a runner and a DAG engine, put load
# on them, check that every dashboard query returns data (or is known to stay
# empty, with the reason) and that the trigger-latency alerts fire when the
# runner is stopped and resolve when it continues. About ten minutes; the
# processes, keyspace, topics and Redis keys are removed however it ends (the
# processes die with the test binary even when it is killed). Logs:
# $(OUT)/observe/.
.PHONY: test-observability
test-observability: stack-up check-rules ## telemetry, dashboards' and rules' PromQL, Prometheus harness, then the end-to-end scenario (~10 min)
	source <($(STACK) env) && $(GO) test -race -count=1 ./internal/telemetry/... ./deploy/...
	@mkdir -p $(OUT)
	$(GO) build -o $(OUT)/sundial ./cmd/sundial
	@rm -rf $(OUT)/observe
	@source <($(STACK) env); rc=0; \
	  SUNDIAL_OBSERVE_BINARY=$(CURDIR)/$(OUT)/sundial SUNDIAL_OBSERVE_DIR=$(CURDIR)/$(OUT)/observe \
	  $(GO) test -tags observability -count=1 -v -timeout 90m -run '^TestObservabilityScenario$$' ./deploy/ > $(OUT)/observability.log 2>&1 || rc=$$?; \
	  grep -E '^\s+(scenario|endtoend)_test.go:[0-9]+: |^(ok|FAIL|---|panic:)' $(OUT)/observability.log || true; \
	  echo "full log: $(OUT)/observability.log"; exit $$rc

.PHONY: dashboards
dashboards: ## regenerate the Grafana dashboards (deploy/grafana/dashboards/*.json) from deploy/grafana/*.go
	$(GO) run ./deploy/grafana/dashgen -out deploy/grafana/dashboards
