"""Benchmark of the designer's pure core: plan + validate + cabling plan + ibnetdiscover export.

    .venv/bin/python tests/benchmarks/bench_designer_core.py [--repeat 5]

Cases: 2,048 GPUs (8 rail-optimised SUs, 2 levels) and 16,384 GPUs (3 levels). Prints per-step
medians, then ONE JSON line with the figures. Targets: 16,384-GPU all four steps < 1 s, peak
memory < 1 GB. `plan()` already validates and measures; the validate step is timed again
separately because the editor re-validates after every edit.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from designer.cabling import cabling_plan
from designer.exports import export
from designer.plan import plan
from designer.validation import validate

CASES = {
    "2048_gpus_2_levels": {"topology": "rail-optimized", "gpus": 2048},
    "16384_gpus_3_levels": {"topology": "rail-optimized", "gpus": 16384},
}
TARGET_S = 1.0
TARGET_MB = 1024


def run_once(options: dict) -> dict[str, float]:
    t0 = time.perf_counter()
    result = plan(options)
    t1 = time.perf_counter()
    report = validate(result.graph)
    t2 = time.perf_counter()
    rows = cabling_plan(result.graph)
    t3 = time.perf_counter()
    content, _, _ = export(result.graph, "ibnetdiscover")
    t4 = time.perf_counter()
    assert result.ok and report.ok and rows and content
    return {
        "plan": t1 - t0,
        "validate": t2 - t1,
        "cabling": t3 - t2,
        "export": t4 - t3,
        "total": t4 - t0,
        "switches": len(result.graph.switches),
        "cables": len(result.graph.links),
        "lines": content.count("\n"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    figures: dict[str, dict] = {}
    for name, options in CASES.items():
        run_once(options)  # warm-up (imports, caches)
        runs = []
        for _ in range(args.repeat):
            gc.collect()
            runs.append(run_once(options))
        med = {
            k: round(statistics.median(r[k] for r in runs), 4)
            for k in ("plan", "validate", "cabling", "export", "total")
        }
        gc.collect()
        tracemalloc.start()
        run_once(options)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        figures[name] = {
            **{f"{k}_s": v for k, v in med.items()},
            "switches": runs[0]["switches"],
            "cables": runs[0]["cables"],
            "ibnetdiscover_lines": runs[0]["lines"],
            "tracemalloc_peak_mb": round(peak / 2**20, 1),
        }
        print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in figures[name].items()), file=sys.stderr)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    big = figures["16384_gpus_3_levels"]
    print(
        json.dumps(
            {
                "benchmark": "designer_core",
                "repeat": args.repeat,
                "cases": figures,
                "ru_maxrss_mb": round(rss_mb, 1),
                "target_total_s": TARGET_S,
                "target_peak_mb": TARGET_MB,
                "meets_targets": big["total_s"] < TARGET_S and rss_mb < TARGET_MB,
            }
        )
    )


if __name__ == "__main__":
    main()
