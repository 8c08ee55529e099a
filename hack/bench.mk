# Benchmarks (bench/, docs in bench/results/latest.md). Included by the
# Makefile. `make bench` is defined there and runs hack/bench.sh.

##@ Benchmarks
.PHONY: bench-check
bench-check: ## Compare bench/results/latest.json with the goals (never part of `make test`).
	@go run -tags bench ./bench check -in bench/results
