# Elasti's make targets. `make help` lists them.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

export GOTOOLCHAIN := local
# The same Go settings as hack/lib/goenv.sh.
export GOFLAGS := -buildvcs=false -gcflags=all=-dwarf=false

TOOLS := $(CURDIR)/bin/tools
CONTROLLER_GEN_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)

# The Kubernetes version the tests and the local cluster run; hack/k8s-binaries.sh
# builds it into a cache outside the repo.
export K8S_VERSION ?= v1.37.2
# The oldest Kubernetes version Elasti supports; `make test` runs the
# integration tests against it too.
OLDEST_K8S_VERSION := v1.35.4

# Time each fuzz target runs inside `make test-unit`.
export FUZZTIME ?= 10s
export OLDEST_K8S_VERSION

##@ General
.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-18s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build
.PHONY: deps
deps: ## Check Go and root, and install the Debian packages the cluster and tests need (quick when present).
	@hack/install-deps.sh

.PHONY: build
build: ## Build every binary into bin/.
	go build -o bin/ ./cmd/...

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests, and the chart's copies of them (hack/chart-copies.txt).
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	@if ls internal/controller/*.go >/dev/null 2>&1; then \
	  $(CONTROLLER_GEN) rbac:roleName=elasti-operator paths=./internal/controller/... output:rbac:artifacts:config=config/rbac; \
	fi
	@grep -v '^#' hack/chart-copies.txt | while read -r src dst; do [ -n "$$src" ] && cp "$$src" "charts/elasti/$$dst"; done; true

.PHONY: k8s-binaries
k8s-binaries: deps ## Build (or reuse) etcd and the Kubernetes binaries from the Go module proxy.
	@hack/k8s-binaries.sh

##@ Verify and test
.PHONY: verify
# --allow-serial-runners: a golangci-lint already running on the machine (an
# editor's) makes this one wait for it instead of failing.
verify: generate manifests $(GOLANGCI_LINT) ## Prove generated files are current; gofmt, vet, lint.
	@git diff --exit-code -- api config charts || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	go vet -tags integration,e2e,bench,multinode ./...
	$(GOLANGCI_LINT) run --allow-serial-runners --build-tags integration,e2e,bench,multinode ./...
	@$(MAKE) --no-print-directory helm-verify

.PHONY: test
test: deps ## Run every test tier: unit, integration (envtest, newest and oldest Kubernetes), end-to-end on one node and on two; prints each tier's time.
	@hack/test.sh

.PHONY: test-unit
test-unit: ## Unit tests under the race detector, then each fuzz target for $(FUZZTIME).
	go test -race -count=1 ./...
	@hack/fuzz.sh $(FUZZTIME)

.PHONY: test-integration
test-integration: deps ## Integration tests only (files tagged integration) against a real kube-apiserver and etcd (envtest), packages side by side.
	@hack/test-integration.sh

.PHONY: test-integration-oldest
test-integration-oldest: deps ## The integration tests against the oldest supported Kubernetes ($(OLDEST_K8S_VERSION)).
	@K8S_VERSION=$(OLDEST_K8S_VERSION) ELASTI_K8S_ENVTEST_ONLY=1 ELASTI_INTEGRATION_SPLIT= hack/test-integration.sh

.PHONY: test-e2e
test-e2e: deps ## End-to-end tests on the local cluster.
	@hack/test-e2e.sh

.PHONY: test-multinode
test-multinode: deps ## The multi-node end-to-end scenarios, on a local cluster of two nodes.
	@hack/test-multinode.sh

##@ Run
.PHONY: demo
demo: deps ## Bring up the local cluster, install Elasti and narrate a scale-to-zero and wake.
	@hack/demo.sh

.PHONY: bench
bench: deps ## Run the benchmarks and write bench/results/latest.md.
	@hack/bench.sh

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(TOOLS)/golangci-lint $@

# Components add their own targets (the local cluster, images) in hack/*.mk.
-include hack/*.mk
