#!/usr/bin/env bash
# Run every benchmark; each prints one JSON line at the end. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Benchmarks that keep state between phases use their own PostgreSQL database (created here) and
# Redis database; the others create a throwaway test database themselves.
export DATABASE_URL=${BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/ibconsole_bench}
export REDIS_URL=${BENCH_REDIS_URL:-redis://127.0.0.1:6379/9}
.venv/bin/python - <<'PY'
import os
import psycopg
from urllib.parse import urlparse
url = urlparse(os.environ["DATABASE_URL"])
name = url.path.lstrip("/")
with psycopg.connect(os.environ["DATABASE_URL"].replace(f"/{name}", "/postgres"), autocommit=True) as c:
    if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
        c.execute(f'CREATE DATABASE "{name}"')
PY
for bench in bench_designer.py bench_import.py bench_placement_core.py bench_fabric.py bench_agent.py bench_sm_failover.py bench_validation.py bench_fault_reach.py bench_qos_verify.py bench_scheduling.py bench_queue.py bench_replay.py bench_power.py bench_energy.py bench_live.py bench_search.py; do
  if [[ -f tests/benchmarks/$bench ]]; then
    echo "==> $bench"
    .venv/bin/python "tests/benchmarks/$bench"
  fi
done
