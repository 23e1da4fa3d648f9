# agentmesh — common tasks. `make help` lists them.
SHELL := bash
BIN   := $(CURDIR)/bin
export PATH := $(BIN):$(PATH)
TOOLS := github.com/bufbuild/buf/cmd/buf \
         google.golang.org/protobuf/cmd/protoc-gen-go \
         google.golang.org/grpc/cmd/protoc-gen-go-grpc \
         github.com/fullstorydev/grpcurl/cmd/grpcurl \
         golang.org/x/perf/cmd/benchstat

.PHONY: help tools generate check-generate lint build test bench bench-langgraph dev jaeger jaeger-run

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

tools: ## build the pinned tools (buf, protoc plugins, grpcurl, benchstat) into ./bin
	@mkdir -p $(BIN)
	cd tools && GOWORK=off go build -o $(BIN)/ $(TOOLS)

JAEGER := $(BIN)/jaeger

jaeger: $(JAEGER) ## build Jaeger v2 from tools/jaeger into ./bin (minutes the first time; again only when tools/jaeger changes)

$(JAEGER): tools/jaeger/go.mod tools/jaeger/go.sum
	@mkdir -p $(BIN)
	cd tools/jaeger && GOWORK=off go build -o $@ github.com/jaegertracing/jaeger/cmd/jaeger

jaeger-run: jaeger ## run Jaeger v2 in memory: OTLP on 127.0.0.1:4317 (gRPC) and :4318 (HTTP), query API on :16686
	$(JAEGER) --config tools/jaeger/config.yaml

generate: tools ## regenerate gen/ from proto/ (offline)
	find gen -name '*.pb.go' -delete
	buf generate

check-generate: generate ## fail when the committed gen/ is stale
	@git diff --exit-code --stat -- gen || { echo "gen/ is stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- gen)" || { git status --porcelain -- gen; echo "gen/ has untracked files: run 'make generate' and commit"; exit 1; }

lint: tools ## go vet, gofmt, buf lint and buf format
	go vet ./... ./gen/...
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'); echo "gofmt needed"; exit 1; }
	buf lint
	buf format --diff --exit-code

build: ## build every binary into ./bin
	go build -o $(BIN)/ ./cmd/...

NPM_DIRS := test/node services/action/testdata

test: $(NPM_DIRS:%=%/node_modules) ## run every test with the race detector (installs the npm packages and the PostgreSQL test database first; the trace test uses bin/jaeger when built)
	AGENTMESH_TEST_POSTGRES_DSN="$${AGENTMESH_TEST_POSTGRES_DSN:-$$(scripts/testdb.sh)}" \
	AGENTMESH_JAEGER="$${AGENTMESH_JAEGER:-$$(test -x $(JAEGER) && echo $(JAEGER))}" \
	go test -race -count=1 ./... ./gen/...

bench-langgraph: tools scripts/langgraph/node_modules ## compare the mesh with LangGraph.js (MemorySaver) on the same runs and model, as benchstat ratios
	$(call rounds,go test -run '^$$' -bench 'VsLangGraph|InFlight' -count 1 ./cmd/agentmesh/internal/mesh/) | tee bench-langgraph.txt
	benchstat -col /impl bench-langgraph.txt

%/node_modules: %/package.json %/package-lock.json
	npm ci --prefix $* --no-audit --no-fund
	@touch $@

BENCH_COUNT ?= 6

# rounds runs a benchmark command BENCH_COUNT times, each taking one sample of every benchmark,
# so that the two sides of each ratio are measured close in time: -count takes a benchmark's
# samples one after the other, and on a shared VM whose speed drifts that skews the ratio (one
# mesh/LangGraph.js ratio measured 0.52x so, 0.70x in alternating rounds).
rounds = set -o pipefail; for round in $$(seq $(BENCH_COUNT)); do $(1) || exit 1; done

bench: tools ## run the benchmarks and compare their configurations with benchstat (ratios, not timings)
	$(call rounds,go test -run '^$$' -bench . -count 1 ./cmd/agentmesh/internal/mesh/) | tee bench.txt
	$(call rounds,go test -run '^$$' -bench Hop -count 1 ./pkg/server/) | tee -a bench.txt
	$(call rounds,go test -run '^$$' -bench 'ParseManyTools|PlanAtTheLimits|RecalledFit|DecideLongTargetLists' -count 1 ./services/intent/ ./services/planning/ ./services/assembly/ ./services/recovery/) | tee -a bench.txt
	$(call rounds,go test -run '^$$' -bench ReindexTerms -count 1 ./services/memory/) | tee -a bench.txt
	benchstat -filter '.name:Turn' -col /turns bench.txt
	benchstat -filter '.name:Turn /stages:""' -col /tracing bench.txt
	benchstat -filter '.name:Turn /tracing:true /stages:""' -col /model bench.txt
	benchstat -filter '.name:Turn /tracing:true /model:""' -col /stages bench.txt
	benchstat -filter '.name:Turn /turns:10 /tracing:true /model:"" /stages:"" /answers:""' -col /tools bench.txt
	benchstat -filter '.name:Turn /turns:10 /tracing:true /model:"" /stages:"" /tools:""' -col /answers bench.txt
	benchstat -filter '.name:Checkpoints' -col /checkpoints bench.txt
	benchstat -filter '.name:IdleRun' -col /provider bench.txt
	benchstat -filter '.name:Concurrent' bench.txt
	benchstat -filter '.name:InFlight' -col /impl bench.txt
	benchstat -filter '.name:Hop /tracing:false' -col /stack bench.txt
	benchstat -filter '.name:Hop /stack:mesh' -col /tracing bench.txt
	benchstat -filter '.name:ParseManyTools' -col /tools bench.txt
	benchstat -filter '.name:PlanAtTheLimits' -col /n bench.txt
	benchstat -filter '.name:RecalledFit' -col /memories bench.txt
	benchstat -filter '.name:DecideLongTargetLists' -col /targets bench.txt
	benchstat -filter '.name:ReindexTerms' -col /terms bench.txt

dev: ## run the whole mesh in one process with embedded NATS
	go run ./cmd/agentmesh dev
