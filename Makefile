# Sundial's Makefile. `make help` lists the targets; each target's comment after
# "##" is its help line.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO    ?= go
STACK := deploy/local/stack.sh
CLUSTER := deploy/local/cluster.sh
SECURE := deploy/local/secure.sh
SECURE_CLUSTER := deploy/local/secure-cluster.sh
# Pinned tool versions.
GOLANGCI_LINT_VERSION := v2.15.0
# Where test logs go; git-ignored.
OUT   ?= .out
# The Jaeger all-in-one the tracing tests export to (deploy/local/jaeger),
# built once into a cache outside the clone, so that a new clone reuses it.
JAEGER_VERSION := v1.76.0
JAEGER ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/sundial/jaeger-$(JAEGER_VERSION)

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: dev
dev: ## run the pipeline in one process on embedded backends (no install needed)
	$(GO) run ./cmd/sundial dev

.PHONY: test
test: stack-up jaeger ## start the real stack, vet, check generated code, run every test with -race against it
	$(GO) vet ./...
	$(GO) vet -tags observability ./deploy/
	$(GO) vet -tags secure ./deploy/
	$(GO) vet -tags cluster ./leasing/ ./runner/ ./dispatcher/
	$(GO) vet -tags crash ./store/cassandra/
	$(MAKE) --no-print-directory check-generate
	$(MAKE) --no-print-directory check-rules
	@mkdir -p $(OUT)
	@source <($(STACK) env); echo "backends: kafka=$$SUNDIAL_KAFKA_BROKERS cassandra=$$SUNDIAL_CASSANDRA_HOSTS redis=$$SUNDIAL_REDIS_ADDR"; rc=0; \
	  SUNDIAL_JAEGER=$(JAEGER) $(GO) test -race -count=1 -timeout 20m -v ./... > $(OUT)/test.log 2>&1 || rc=$$?; \
	  grep -E '^(ok|FAIL|---|panic:|\?)' $(OUT)/test.log | grep -v -- '--- PASS' || true; \
	  echo "full log: $(OUT)/test.log"; exit $$rc

.PHONY: test-unit
test-unit: ## fast tests only: no backends, integration tests skip under -short
	$(GO) test -short -count=1 ./...

.PHONY: lint
lint: ## go vet and golangci-lint (config in .golangci.yml), also on the chart test's module
	$(GO) vet ./...
	$(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run --allow-parallel-runners ./...
	cd deploy/helm/charttest && $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) run --allow-parallel-runners --config ../../../.golangci.yml ./...

.PHONY: generate
generate: ## regenerate protobuf code, the Connect Go client and docs/api/openapi.yaml with the pinned buf and plugins
	cd proto && $(GO) tool buf generate

.PHONY: check-generate
check-generate: generate ## fail when generated code differs from what is committed
	@git diff --exit-code -- proto docs/api || { echo "generated code is stale: run 'make generate' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- proto docs/api)" || { echo "generated files are not committed:" >&2; git status --porcelain -- proto docs/api >&2; exit 1; }

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

# The container image, built without a container engine (deploy/image): a
# static binary, the host's CA bundle and a non-root user on an empty base, as
# a tarball for `docker load` or `podman load`. Same sources, same digest: the
# files carry the commit time.
DIST        := dist
IMAGE_TAG   ?= sundial:dev
IMAGE_ARCH  ?= $(shell $(GO) env GOARCH)

.PHONY: image
image: ## build the container image without Docker into dist/sundial-image.tar (docker load -i dist/sundial-image.tar)
	@mkdir -p $(DIST)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags='-s -w' -o $(DIST)/sundial-linux-$(IMAGE_ARCH) ./cmd/sundial
	$(GO) run ./deploy/image -binary $(DIST)/sundial-linux-$(IMAGE_ARCH) -out $(DIST)/sundial-image.tar -tag $(IMAGE_TAG) \
	  -created "$$(git log -1 --format=%cI)" -revision "$$(git rev-parse HEAD)" -version "$$(git describe --tags --always --dirty)"

.PHONY: jaeger
jaeger: ## build (once) the Jaeger all-in-one that the tracing tests send spans to and query
	@test -x $(JAEGER) || { echo "building jaeger $(JAEGER_VERSION) into $(JAEGER)"; mkdir -p $(dir $(JAEGER)); \
	  cd deploy/local/jaeger && $(GO) build -o $(JAEGER).tmp github.com/jaegertracing/jaeger/cmd/jaeger && mv $(JAEGER).tmp $(JAEGER); }

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

.PHONY: cluster-up
cluster-up: ## start the local clusters: 3 Kafka brokers (RF 3, min ISR 2), a Redis Cluster of 3 masters with replicas, 3 Cassandra nodes
	$(CLUSTER) up

.PHONY: cluster-down
cluster-down: ## stop the local clusters; no process is left behind
	$(CLUSTER) down

.PHONY: cluster-status
cluster-status: ## show each cluster node's state and role
	$(CLUSTER) status

.PHONY: secure-up
secure-up: ## start the secured local stack: Kafka SASL_SSL with SCRAM users and ACLs, Cassandra and Redis with TLS and passwords, a TLS Redis Cluster, a Sentinel group (ports 25xxx)
	$(SECURE) up
	$(SECURE_CLUSTER) up
	$(CLUSTER) up sentinel

.PHONY: secure-down
secure-down: ## stop the secured local stack, its Redis Cluster and the Sentinel group
	$(SECURE) down
	$(SECURE_CLUSTER) down
	$(CLUSTER) down sentinel

.PHONY: secure-status
secure-status: ## show the secured stack's backends, probed over TLS with a login
	$(SECURE) status

# The secured-stack tests (deploy/securestack_test.go and
# securesundial_test.go, behind the secure build tag so that `make test`
# neither builds nor skips them): raw clients against each secured backend,
# then the built sundial command, configured by flags only, runs migrate, a
# registry, a dispatcher and a runner until a job fires; wrong passwords, an
# unknown CA and a Kafka user without ACLs must each fail with the backend
# and the cause named, and no output may show a password. Leases are taken
# over TLS as the ACL user on the secured Redis Cluster, and across a forced
# failover of the Sentinel group (secureredis_test.go; starting both and the
# test add about 15 s). A missing secured stack fails them. No -race: the code under test runs in subprocesses.
# Logs: $(OUT)/test-secure.log and the processes' output in $(OUT)/secure/.
.PHONY: test-secure
test-secure: secure-up ## the secured-stack tests: TLS, SASL, ACLs and passwords end to end with sundial's flags
	@mkdir -p $(OUT)
	@rm -rf $(OUT)/secure
	@source <($(SECURE) env); source <($(SECURE_CLUSTER) env); source <($(CLUSTER) env); rc=0; \
	  SUNDIAL_SECURE_OUT=$(CURDIR)/$(OUT)/secure \
	  $(GO) test -tags secure -count=1 -timeout 20m -v -run '^TestSecureStack' ./deploy/ > $(OUT)/test-secure.log 2>&1 || rc=$$?; \
	  grep -E '^(ok|FAIL|---|panic:)|^\s+secure[a-z]*_test\.go:[0-9]+: (failed|the job|no password)' $(OUT)/test-secure.log | grep -v -- '--- PASS' || true; \
	  echo "full log: $(OUT)/test-secure.log"; exit $$rc

# The tests of the local clusters (deploy/local/cluster.sh): the leasing
# suite and the hash-slot proof on the Redis Cluster, then a Kafka broker, a
# Redis master and a Cassandra node killed while runs fire. They kill nodes,
# so they run one package at a time and apart from `make test`, behind the
# cluster build tag (so `make test` neither builds nor skips them); a missing
# cluster fails them. 4 to 7 minutes on a busy two-core machine once the
# clusters run, compiling included (starting them adds 15 s to a minute,
# and about 90 s for the three Cassandra nodes, which bootstrap one after
# the other). Log: $(OUT)/test-cluster.log.
CLUSTER_TESTS := ^(TestConformanceRedisCluster|TestLeaseKeysShareSlotOnCluster|TestKafkaBrokerKilledWhileRunsFire|TestRedisMasterKilledWhileRunsFire|TestCassandraNodeKilledWhileRunsFire)$$

.PHONY: test-cluster
test-cluster: cluster-up ## failure tests on the local clusters: broker kill, Redis master kill, Cassandra node kill, leasing on Redis Cluster (4-7 min)
	@mkdir -p $(OUT)
	@source <($(CLUSTER) env); echo "clusters: kafka=$$SUNDIAL_KAFKA_CLUSTER_BROKERS redis=$$SUNDIAL_REDIS_CLUSTER_ADDRS cassandra=$$SUNDIAL_CASSANDRA_CLUSTER_HOSTS"; rc=0; \
	  $(GO) test -tags cluster -race -count=1 -p 1 -timeout 20m -v -run '$(CLUSTER_TESTS)' ./leasing/ ./runner/ ./dispatcher/ > $(OUT)/test-cluster.log 2>&1 || rc=$$?; \
	  grep -E '^(ok|FAIL|---|panic:)|^\s+cluster_test.go:[0-9]+: (killed|cost|runs|every|restarted|[0-9]+ jobs)' $(OUT)/test-cluster.log | grep -v -- '--- PASS' || true; \
	  echo "full log: $(OUT)/test-cluster.log"; exit $$rc

# The crash tests kill a backend with SIGKILL and start it again, so they get
# a stack of their own (Cassandra only, in .stack-crash, on ports 23042 and
# 23000, downloads shared with .stack), never the shared one; it is stopped
# afterwards. About 2 minutes. Log: $(OUT)/test-crash.log.
CRASH_ENV := SUNDIAL_STACK_DIR=$(CURDIR)/.stack-crash SUNDIAL_STACK_DIST_DIR=$${SUNDIAL_STACK_DIST_DIR:-$(CURDIR)/.stack/dist} \
  SUNDIAL_CASSANDRA_PORT=23042 SUNDIAL_CASSANDRA_STORAGE_PORT=23000 SUNDIAL_CASSANDRA_HEAP=1g
CRASH_STACK := env $(CRASH_ENV) $(STACK)

.PHONY: test-crash
test-crash: ## acknowledged writes survive a SIGKILL of Cassandra, on a Cassandra of its own (~2 min)
	@mkdir -p $(OUT)
	$(CRASH_STACK) up cassandra
	@rc=0; env $(CRASH_ENV) SUNDIAL_CASSANDRA_HOSTS=127.0.0.1:23042 SUNDIAL_CRASH_STACK_CTL=$(CURDIR)/$(STACK) \
	  $(GO) test -tags crash -count=1 -timeout 20m -v -run '^TestAcknowledgedWritesSurviveKill$$' ./store/cassandra/ > $(OUT)/test-crash.log 2>&1 || rc=$$?; \
	  $(CRASH_STACK) down cassandra; \
	  grep -E '^(ok|FAIL|---|panic:)|crash_test.go:[0-9]+: [0-9]+ writes' $(OUT)/test-crash.log || true; \
	  echo "full log: $(OUT)/test-crash.log"; exit $$rc

.PHONY: migrate
migrate: stack-up ## create the keyspace, tables and topics on the local stack
	source <($(STACK) env) && $(GO) run ./cmd/sundial migrate

.PHONY: bench
bench: stack-up ## run a bench scenario on the real stack: make bench SCENARIO=steady
	source <($(STACK) env) && $(GO) run ./cmd/sundial bench $(or $(SCENARIO),steady)

.PHONY: bench-schedule
bench-schedule: ## time the next occurrence of rare cron expressions, with the host's and the compiled-in zone database
	$(GO) test -run '^$$' -bench BenchmarkNextRare -benchtime $(or $(BENCHTIME),300x) ./schedule/

# The property test runs in `make test` at a few hundred cases; this runs it
# long. SEED replays a failure (the test logs the seed it used).
.PHONY: property-schedule
property-schedule: ## check the schedule calculator against its oracles: make property-schedule CASES=100000
	SUNDIAL_SCHEDULE_PROPERTY_CASES=$(or $(CASES),100000) $(if $(SEED),SUNDIAL_SCHEDULE_PROPERTY_SEED=$(SEED)) \
	  $(GO) test -count=1 -timeout 60m -run 'TestNextMatches(Calendar)?Oracle' -v ./schedule/

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
	$(MAKE) --no-print-directory chart-files

.PHONY: check-dashboards
check-dashboards: dashboards ## fail when the committed dashboards differ from what deploy/grafana/*.go generates
	@git diff --exit-code -- deploy/grafana/dashboards || { echo "dashboards are stale: run 'make dashboards' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- deploy/grafana/dashboards)" || { echo "generated dashboards are not committed:" >&2; git status --porcelain -- deploy/grafana/dashboards >&2; exit 1; }

# The Helm chart (deploy/helm/sundial) rendered with the pinned Helm library
# for the default and the secured values and checked against the Kubernetes
# and Prometheus Operator types: a module of its own (deploy/helm/charttest),
# so that Helm's dependencies stay out of the main module. No cluster needed;
# about 15 s once its modules are downloaded.
.PHONY: test-chart
test-chart: ## render the Helm chart and validate it against the Kubernetes types (no cluster)
	cd deploy/helm/charttest && $(GO) vet ./... && $(GO) test -count=1 ./...

.PHONY: chart-files
chart-files: ## copy the dashboards and alert rules into the Helm chart (a chart reads only its own files)
	rm -f deploy/helm/sundial/files/dashboards/*.json deploy/helm/sundial/files/rules/*.yml
	cp deploy/grafana/dashboards/*.json deploy/helm/sundial/files/dashboards/
	cp deploy/prometheus/rules/*.yml deploy/helm/sundial/files/rules/

# Everything CI checks before it runs the tests; needs no backend. Each step
# stops the run at its first failure, so the cheap ones come first.
# The console's browser tests run axe-core, vendored in console/testdata so
# that go test needs no Node and no network; console/a11y pins it in a lock
# file. check-axe installs the locked version and fails when the vendored
# copy differs from it.
.PHONY: check-axe
check-axe: ## fail when console/testdata/axe.min.js differs from the axe-core that console/a11y/package-lock.json pins
	npm ci --prefix console/a11y --ignore-scripts --no-audit --no-fund
	@cmp console/a11y/node_modules/axe-core/axe.min.js console/testdata/axe.min.js || { echo "console/testdata/axe.min.js differs from the locked axe-core: copy console/a11y/node_modules/axe-core/axe.min.js over it and commit" >&2; exit 1; }

.PHONY: verify
verify: ## golangci-lint, buf lint, the breaking check against main, generated-code, dashboard and vendored axe-core drift, the Helm chart
	$(MAKE) --no-print-directory lint-proto
	$(MAKE) --no-print-directory proto-breaking
	$(MAKE) --no-print-directory check-generate
	$(MAKE) --no-print-directory check-dashboards
	$(MAKE) --no-print-directory check-axe
	$(MAKE) --no-print-directory test-chart
	$(MAKE) --no-print-directory lint
