#!/usr/bin/env bash
# End-to-end tests on the local cluster. Filled in by the local-cluster work.
set -euo pipefail
if ! git ls-files 'test/e2e/*_test.go' | grep -q .; then
  echo "e2e: no end-to-end tests yet (the local cluster is not built yet)"
  exit 0
fi
go test -count=1 -tags e2e -timeout 60m -v ./test/e2e/...
