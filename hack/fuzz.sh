#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time each.
# Usage: hack/fuzz.sh [fuzztime]   (default 10s)
set -euo pipefail
fuzztime=${1:-10s}
found=0
while IFS= read -r file; do
  pkg="./$(dirname "$file")"
  for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
    found=1
    echo "fuzz: $pkg $target for $fuzztime"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' || true)
[[ $found == 1 ]] || echo "fuzz: no fuzz targets yet"
