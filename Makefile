# rdma_doctor: `make run` serves the bundled DGX fixture host on :9873,
# `make test` runs everything a change can break, `make short` the fast
# loop to run while editing (CONTRIBUTING.md).

GO          ?= go
BIN         := rdma_doctor
PKG         := github.com/rdma-doctor/rdma_doctor
VERSION     := $(shell cat VERSION)
REVISION    := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BRANCH      := $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Built from source by go run on first use (minutes), then cached.
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
# The tools the deploy tests run as real peers, pinned here only: make tools
# installs them (.ci/run does).
HELM        := helm.sh/helm/v3/cmd/helm@v3.22.0
NFPM        := github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
KUBECONFORM := github.com/yannh/kubeconform/cmd/kubeconform@v0.7.0
GOARCH      := $(shell $(GO) env GOARCH)
FUZZTIME    ?= 200000x
RUN_HOST    ?= dgx-h100
LISTEN      ?= :9873

LDFLAGS := -X github.com/prometheus/common/version.Version=$(VERSION) \
	-X github.com/prometheus/common/version.Revision=$(REVISION) \
	-X github.com/prometheus/common/version.Branch=$(BRANCH) \
	-X github.com/prometheus/common/version.BuildUser=$(shell id -un)@$(shell hostname) \
	-X github.com/prometheus/common/version.BuildDate=$(shell date -u +%Y%m%d-%H:%M:%S)

.PHONY: all build test unit short e2e lint fmt vet staticcheck golangci-lint bench bench-caches wakeups bench-fabric bench-summary bench-all fuzz run demo update-golden generate clean tools package image

all: lint build test

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/rdma_doctor

# Unit tests with the race detector, the end-to-end tests of the built binary
# on every fixture host (golden files, promtool, the real ibstat), and lint.
test: lint unit

# go test -json through tools/testsummary: the usual lines, the output of
# failing tests, and at the end every skipped test with its reason.
unit:
	@bash -o pipefail -c '$(GO) test -race -count=1 -timeout 60m -json ./... | $(GO) run ./tools/testsummary'

# The loop to run while editing: every package with -short, which skips
# the long tests (testenv.Long: the images and packages, the simulated
# fabric, the real Prometheus and Alertmanager, the -race load, headless
# Chromium), each listed at the end; at most 2 minutes on 2 idle cores.
short:
	@bash -o pipefail -c '$(GO) test -short -count=1 -json ./... | $(GO) run ./tools/testsummary'

# The packages that hold the long tests make short skips, in full and
# without -race (make test runs them with it).
E2E_PKGS ?= ./e2e ./deploy ./alerts ./internal/serve/scrape
e2e:
	@bash -o pipefail -c '$(GO) test -count=1 -json $(E2E_PKGS) | $(GO) run ./tools/testsummary'

lint: fmt vet staticcheck golangci-lint

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

staticcheck:
	$(GO) run $(STATICCHECK) ./...

# .golangci.yml: the standard linters, errorlint, sloglint, and depguard
# keeping os/exec inside internal/read/subprocess.
golangci-lint:
	$(GO) run $(GOLANGCI_LINT) run ./...

# The real Prometheus (Debian's prometheus) with the shipped rules, scraping
# the built binary on several fixture hosts and, when ibsim is installed, on
# the simulated fabric (tools/demo, internal/dev/demo): every dashboard query
# has data to look at on the printed URL. Ctrl-C stops it all.
# DEMO_FLAGS passes flags, e.g. DEMO_FLAGS='-web.listen-address=127.0.0.1:9091'.
DEMO_FLAGS ?=
demo: build
	$(GO) run ./tools/demo -binary ./$(BIN) $(DEMO_FLAGS)

# Rewrites fixtures/golden/*.metrics from the current binary.
update-golden:
	$(GO) test -count=1 ./e2e -run TestGolden -update

# Regenerates, from the mixin config's defaults (mixin.Default), the
# committed dashboards (dashboards/build), the rules (alerts/*.tmpl), the
# inhibit snippet and the Kubernetes PrometheusRule, then the Helm chart's
# copies of them (deploy/helm/rdma-doctor/files) and the golden of its
# default render (needs helm: make tools); make test fails when stale.
generate:
	$(GO) test -count=1 ./dashboards -run TestUpToDate -update
	$(GO) test -count=1 ./alerts -run 'TestRulesUpToDate|TestInhibitRulesUpToDate|TestAlertmanagerUpToDate' -update
	# A second build: the PrometheusRule renders the rules file as embedded,
	# which the line above may just have rewritten.
	$(GO) test -count=1 ./alerts -run 'TestPrometheusRule' -update
	$(GO) test -count=1 ./deploy -run TestChartCopiesUpToDate -update
	$(GO) test -count=1 ./deploy -run TestChartGolden -update

# helm, nfpm and kubeconform at their pinned versions into $(go env GOPATH)/bin.
tools:
	$(GO) install $(HELM)
	$(GO) install $(NFPM)
	$(GO) install $(KUBECONFORM)

# The .deb and .rpm for this GOARCH into .tarballs/ (nfpm.yaml).
package: build
	mkdir -p .tarballs
	for p in deb rpm; do VERSION=$(VERSION) GOARCH=$(GOARCH) $(GO) run $(NFPM) package --config nfpm.yaml --packager $$p --target .tarballs/ || exit 1; done

# The images for this GOARCH from make build's binary, laid out as promu
# lays out its build (.build/linux-ARCH). The tools variant pulls its
# Debian base unless BASE names a local one.
image: build
	mkdir -p .build/linux-$(GOARCH) && cp $(BIN) .build/linux-$(GOARCH)/$(BIN)
	podman build --build-arg ARCH=$(GOARCH) -t rdma_doctor:$(VERSION) .
	podman build -f Dockerfile.tools --build-arg ARCH=$(GOARCH) $(if $(BASE),--build-arg BASE=$(BASE)) -t rdma_doctor:$(VERSION)-tools .

# docs/performance.md: the benchmarks behind it (go test -bench: the scrape
# against the raw floor and prometheus/procfs, growth with devices, IRQs,
# diagnose, the port state sampler), the load test at LOAD_REQUESTS and the
# side-by-side run against node_exporter (tools/sidebyside: builds
# rdma_doctor, installs the pinned node_exporter into
# ~/.cache/rdma_doctor-bench, generates hosts into a temporary directory,
# mounts tools/slowfs: needs root and /dev/fuse), then tools/perfreport.
# Not part of make test. SIDEBYSIDE_FLAGS passes flags, e.g.
# SIDEBYSIDE_FLAGS='-rdma-doctor ./rdma_doctor -scrapes 300'. BENCH_RAW,
# if set, is a directory that keeps the raw outputs (bench.txt, load.txt,
# sidebyside.json) from which perfreport can rewrite the page.
# YUUKI_EXPORTER, if set, is a yuuki/rdma_exporter binary measured in the
# same loop (it is not on the Go module proxy: go build it from a checkout
# of github.com/yuuki/rdma_exporter; docs/performance.md says which).
YUUKI_EXPORTER   ?=
BENCH_PKGS       ?= ./internal/dev/scrapebench ./internal/read/irq ./diagnose/checks ./internal/read/portwatch
LOAD_REQUESTS    ?= 20000
SIDEBYSIDE_FLAGS ?=
BENCH_RAW        ?=

bench:
	@set -e; d=$$(mktemp -d); trap 'rm -rf $$d' EXIT; \
	$(GO) test -run '^$$' -bench . -benchmem -count=1 $(BENCH_PKGS) | tee $$d/bench.txt; \
	RDMA_DOCTOR_LOAD_REQUESTS=$(LOAD_REQUESTS) RDMA_DOCTOR_PERF_OUT=$$d/load.txt \
		$(GO) test -count=1 -run '^TestLoad$$' -v ./e2e; \
	$(GO) run ./tools/sidebyside $(if $(YUUKI_EXPORTER),-yuuki-exporter $(YUUKI_EXPORTER)) $(SIDEBYSIDE_FLAGS) -o $$d/sidebyside.json; \
	$(MAKE) --no-print-directory wakeups WAKEUPS_OUT=$$d/wakeups.json; \
	$(GO) run ./tools/perfreport -bench $$d/bench.txt -load $$d/load.txt -sidebyside $$d/sidebyside.json -wakeups $$d/wakeups.json -o docs/performance.md; \
	if [ -n "$(BENCH_RAW)" ]; then mkdir -p "$(BENCH_RAW)" && cp $$d/bench.txt $$d/load.txt $$d/sidebyside.json $$d/wakeups.json "$(BENCH_RAW)"/; fi; \
	echo "wrote docs/performance.md"
	$(MAKE) --no-print-directory bench-summary

# docs/architecture.md's performance summary, generated from
# docs/performance.md's tables (tools/perfreport -readme); make bench and
# make bench-fabric run it after writing the page, and tools/perfreport's
# TestPerfSummaryFresh fails when the summary and the page differ.
bench-summary:
	$(GO) run ./tools/perfreport -readme docs/architecture.md -perf docs/performance.md

# Idle wake-ups (docs/performance.md): the built server idle on the DGX
# fixture, with and without the kernel log reader, then node_exporter
# (installed into the bench cache as tools/sidebyside does), one after the
# other, each for WAKEUPS_DURATION after a settle time (tools/wakeups: the
# threads' context switches). WAKEUPS_OUT is the JSON tools/perfreport reads.
WAKEUPS_DURATION ?= 90s
WAKEUPS_OUT      ?= wakeups.json
WAKEUPS_NE       := $${XDG_CACHE_HOME:-$$HOME/.cache}/rdma_doctor-bench/node_exporter-v1.10.1

wakeups: build
	@set -e; ne=$(WAKEUPS_NE); [ -x $$ne/node_exporter ] || GOBIN=$$ne $(GO) install github.com/prometheus/node_exporter@v1.10.1; \
	$(GO) run ./tools/wakeups -duration $(WAKEUPS_DURATION) -o $(WAKEUPS_OUT) \
		-run "rdma_doctor=./$(BIN) --path.rootfs=fixtures/hosts/dgx-h100 --web.listen-address=127.0.0.1:19873" \
		-run "rdma_doctor --no-collector.kmsg=./$(BIN) --path.rootfs=fixtures/hosts/dgx-h100 --web.listen-address=127.0.0.1:19873 --no-collector.kmsg" \
		-run "node_exporter v1.10.1=$$ne/node_exporter --web.listen-address=127.0.0.1:19100"
# docs/performance.md's fabric section (tools/fabricbench): rdma_doctor's
# fabric collector (the background counter sweep, the route read's
# dump_fts, the cached scrape, its memory) and treydock/infiniband_exporter on the same simulated fat trees
# of FABRIC_SIZES hosts (ibsim, opensm, infiniband-diags: Debian
# ibsim-utils, opensm, infiniband-diags), measured in turns. Not part of
# make test; minutes at 4000 hosts. TREYDOCK_EXPORTER, if set, is a
# treydock/infiniband_exporter binary (not on the Go module proxy: go build
# it from a checkout of github.com/treydock/infiniband_exporter;
# TREYDOCK_VERSION names its version when the build has none); without
# it the section says treydock was skipped. FABRIC_SIZES=200 is a quick
# run. FABRICBENCH_FLAGS passes flags, e.g. '-rounds 2 -json raw.json'.
TREYDOCK_EXPORTER ?=
TREYDOCK_VERSION  ?=
FABRIC_SIZES      ?= 1000,4000
FABRICBENCH_FLAGS ?=

bench-fabric: build
	$(GO) run ./tools/fabricbench -rdma-doctor ./$(BIN) -sizes $(FABRIC_SIZES) \
		$(if $(TREYDOCK_EXPORTER),-treydock-exporter $(TREYDOCK_EXPORTER)) \
		$(if $(TREYDOCK_VERSION),-treydock-version '$(TREYDOCK_VERSION)') \
		$(FABRICBENCH_FLAGS) -o docs/performance.md
	$(MAKE) --no-print-directory bench-summary

# What each cache a scrape keeps saves: tools/cacheab's patches, each
# turning one cache off, measured against the tree in interleaved rounds
# (docs/caches.md). ROUNDS sets how many (default 12, about 3 minutes).
bench-caches:
	tools/cacheab/run.sh

# Every benchmark of every package.
bench-all:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

# Runs every fuzz target for FUZZTIME each: a count of executions (200000x)
# rather than a duration, which Go 1.26 can fail spuriously (golang/go#75804).
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

RUN_CONFIG := $(wildcard fixtures/hosts/$(RUN_HOST)/etc/rdma_doctor/rdma_doctor.yml)

# Serves a fixture host (and its config, if it has one) on $(LISTEN).
run: build
	./$(BIN) --path.rootfs=fixtures/hosts/$(RUN_HOST) $(if $(RUN_CONFIG),--config.file=$(RUN_CONFIG)) --web.listen-address=$(LISTEN)

clean:
	rm -f $(BIN)
