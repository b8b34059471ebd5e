#!/usr/bin/env bash
# Run every benchmark; each prints one JSON line at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
for bench in tests/benchmarks/bench_*.py; do
  echo "==> $bench"
  .venv/bin/python "$bench"
done
