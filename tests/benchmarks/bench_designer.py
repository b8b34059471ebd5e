"""The designer benchmark of issue 3, end to end.

    .venv/bin/python tests/benchmarks/bench_designer.py

1. plan + validate + cabling plan + ibnetdiscover export for 2,048 GPUs (2 levels) and 16,384
   GPUs (3 levels), and peak memory (bench_designer_core.py, in a subprocess);
2. saving the 16,384-GPU revision to PostgreSQL (database ``BENCH_DATABASE_URL``, default
   ``postgres://postgres@127.0.0.1:5432/ibconsole_bench``, created and migrated when missing);
3. the 2,048-GPU canvas opening interactive in headless Chromium (bench_designer_canvas.py
   against a console started here in embedded mode with the demo seed).

Targets: 16,384-GPU plan (four steps) < 1 s, save < 10 s, peak memory < 1 GB, canvas < 2 s.
Ends by printing ONE JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from benchutil import free_port

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
BENCH_DB = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/ibconsole_bench")
BIG = {"topology": "rail-optimized", "gpus": 16384, "node_type": "DGX-H100", "switch": "QM9700"}


def last_json_line(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def core() -> dict:
    out = subprocess.run(
        [PY, "tests/benchmarks/bench_designer_core.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    return last_json_line(out)


def save_to_postgres(repeat: int = 3) -> dict:
    """Median time to store a 16,384-GPU revision (serialise + insert + audit) on PostgreSQL."""
    import psycopg

    name = BENCH_DB.rsplit("/", 1)[1]
    with psycopg.connect(BENCH_DB.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    env = os.environ | {"DATABASE_URL": BENCH_DB}
    env.pop("REDIS_URL", None)
    subprocess.run([PY, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=env, check=True)
    code = f"""
import json, statistics, time, django, os
os.environ["DATABASE_URL"] = {BENCH_DB!r}
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
django.setup()
from django.db import transaction
from console.tenancy.context import Actor
from designer import services
from designer.models import Design
from designer.plan import plan
result = plan({BIG!r})
times, size = [], 0
for i in range({repeat}):
    Design.objects.filter(name__startswith="bench-16k").delete()
    started = time.perf_counter()
    with transaction.atomic():
        design = Design.objects.create(name=f"bench-16k-{{i}}", topology=result.topology)
        revision = services._save_revision(Actor.system("bench"), design, result.graph,
                                           result.summary(), "bench", None)
    times.append(time.perf_counter() - started)
size = len(json.dumps(revision.graph))
Design.objects.filter(name__startswith="bench-16k").delete()
print(json.dumps({{"save_16384_s_median": round(statistics.median(times), 3),
                  "save_16384_s_runs": [round(t, 3) for t in times], "graph_json_mb":
                  round(size / 2**20, 1)}}))
"""
    out = subprocess.run([PY, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    return last_json_line(out)


def canvas() -> dict:
    data_dir = tempfile.mkdtemp(prefix="bench-designer-")
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"CONSOLE_DATA_DIR": data_dir, "CONSOLE_LAB": "0"}
    for args in (["migrate", "-v", "0"], ["demo", "seed"]):
        subprocess.run([PY, "manage.py", *args], cwd=ROOT, env=env, check=True, capture_output=True)
    port = free_port()
    server = subprocess.Popen(
        [PY, "manage.py", "up", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.3)
        out = subprocess.run(
            [PY, "tests/benchmarks/bench_designer_canvas.py", "--url", f"http://127.0.0.1:{port}"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return last_json_line(out)
    finally:
        os.killpg(server.pid, 15)
        server.wait(20)


def main() -> None:
    core_figures = core()
    save = save_to_postgres()
    canvas_figures = canvas()
    big = core_figures["cases"]["16384_gpus_3_levels"]
    figures = {
        "benchmark": "designer",
        "plan_2048_total_s": core_figures["cases"]["2048_gpus_2_levels"]["total_s"],
        "plan_16384_total_s": big["total_s"],
        "plan_16384_steps_s": {k: big[f"{k}_s"] for k in ("plan", "validate", "cabling", "export")},
        "peak_rss_mb": core_figures["ru_maxrss_mb"],
        **save,
        "canvas_2048_interactive_ms_median": canvas_figures["interactive_ms_median"],
        "canvas_2048_interactive_ms_max": canvas_figures["interactive_ms_max"],
        "targets": {
            "plan_16384_s": 1.0,
            "save_16384_s": 10.0,
            "peak_mb": 1024,
            "canvas_ms": 2000,
        },
    }
    figures["meets_targets"] = (
        figures["plan_16384_total_s"] < 1.0
        and figures["save_16384_s_median"] < 10.0
        and figures["peak_rss_mb"] < 1024
        and figures["canvas_2048_interactive_ms_median"] < 2000
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
