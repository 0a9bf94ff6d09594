# mptx — build, test and benchmark.
#
#   make run       build and run the default experiment suite in the simulator
#   make deps      install the Debian packages the tests need (root; idempotent)
#   make build     build bin/mptx
#   make test      go vet + race tests of every package (the CI command)
#   make bench     benchmarks of the hot paths (pipe into benchstat)
#   make lint      gofmt + go mod tidy -diff + go vet
#   make cover     coverage profile and summary
#   make rxe-test  real-verbs tests inside a Soft-RoCE qemu VM (root)
#   make fuzz      every fuzz target for a share of FUZZ_BUDGET (default 120s)

export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
PKGS    ?= ./...
BENCH   ?= .
COUNT   ?= 6

.PHONY: all run deps build test bench lint cover rxe-test fuzz clean

all: build

deps:
	@bash scripts/deps.sh

build: deps
	$(GO) build -o bin/mptx ./cmd/mptx

run: deps build
	./bin/mptx exp run

include telemetry.mk

test: deps jaeger
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) vet $(PKGS)

cover:
	$(GO) test -count=1 -coverprofile=cover.out $(PKGS)
	$(GO) tool cover -func=cover.out | tail -1

rxe-test:
	@bash scripts/rxe-test.sh

fuzz: deps
	@bash scripts/fuzz.sh

clean:
	rm -rf bin cover.out
