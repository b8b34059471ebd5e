#!/usr/bin/env bash
# Run every benchmark; each prints one JSON line at the end. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
for bench in bench_designer.py bench_placement_core.py bench_fabric.py bench_scheduling.py bench_live.py; do
  if [[ -f tests/benchmarks/$bench ]]; then
    echo "==> $bench"
    .venv/bin/python "tests/benchmarks/$bench"
  fi
done
