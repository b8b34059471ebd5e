"""Benchmark: the whole fabric validation suite on the 2,048-GPU lab, through the SM host's agent.

The demo's ``superpod-2048`` design (256 DGX H100 = 2,048 HCAs) runs as a lab; uvicorn serves the
console and the lab's agent connects out to it as ``manage.py up`` starts it (``benchconsole.py``).
Each round runs ``manage.py fabric validate``'s suite in this process (a discovery, every
switch's forwarding table, every switch port's state and error counters, the P_Key verification,
the SM hosts, the cabling, and the PHY readings: a recorded mlxlink output for every switch port
in the SM host's PHY directory, parsed by the agent) and times it end to end and per test. The same process also times
the discovery alone (the one ibnetdiscover the suite starts with) as the baseline the suite is
measured against. Target: the whole suite under 10 s (median of ``--runs``).

Run: ``DATABASE_URL=… REDIS_URL=… .venv/bin/python tests/benchmarks/bench_validation.py [--runs 3]``.
Ends by printing ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402 - path and settings set up above for direct runs

django.setup()

from benchconsole import console_with_agent  # noqa: E402
from django.core.management import call_command  # noqa: E402

from console.demo import seed_designs  # noqa: E402
from console.fabric import changes  # noqa: E402
from console.fabric.changes.pipeline import apply_change  # noqa: E402
from console.fabric.discovery.services import discover  # noqa: E402
from console.fabric.lab.fabrics import INSTALL_HINT, missing_packages, start_lab, stop_lab  # noqa: E402
from console.telemetry import validation  # noqa: E402
from console.tenancy.context import Actor  # noqa: E402
from designer.models import DesignRevision  # noqa: E402

DESIGN = "superpod-2048"
ACTOR = Actor.system("bench-validation")
TARGET_S = 10.0


def record_phy(lab, directory: Path) -> int:
    """A healthy mlxlink reading for every switch port, as the SM host's periodic job records them."""
    text = (ROOT / "tests" / "data" / "phy" / "healthy_ndr_optic.txt").read_text()
    directory.mkdir(parents=True, exist_ok=True)
    files = 0
    for switch in lab.topology.switches():
        for port in range(1, switch.nports + 1):
            (directory / f"0x{switch.node_id[2:]}_{port}.txt").write_text(text)
            files += 1
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--design", default=DESIGN)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if missing_packages():
        sys.exit(f"the lab needs {', '.join(missing_packages())}: {INSTALL_HINT}")
    seed_designs(ACTOR)
    revision = DesignRevision.objects.filter(design__name=args.design).order_by("-number").first()
    assert revision is not None, args.design
    figures: dict[str, object] = {"benchmark": "validation", "design": args.design, "runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="bench-validation-") as tmp:
        base = Path(tmp)
        fabric, lab = start_lab(revision, name="bench-validation", actor=ACTOR, workdir=base / "lab")
        try:
            figures["phy_files"] = record_phy(lab, base / "lab" / "phy")
            with console_with_agent(fabric, base, ACTOR):
                change = changes.reconcile(fabric, actor=ACTOR)  # the console's state applied: pkeys has work
                if change is not None:
                    applied = apply_change(change.pk, worker_id="bench")
                    assert applied is not None and applied.status == "applied", applied and applied.error
                suite_s: list[float] = []
                discovery_s: list[float] = []
                per_test: dict[str, list[float]] = defaultdict(list)
                failed: set[str] = set()
                skipped: set[str] = set()
                for _ in range(args.runs):
                    t = time.monotonic()
                    run = discover(fabric, actor=ACTOR)
                    discovery_s.append(time.monotonic() - t)
                    t = time.monotonic()
                    report = validation.validate_now(fabric.pk, actor=ACTOR)
                    suite_s.append(time.monotonic() - t)
                    assert report["state"] == "done", report["error"]
                    failed |= set(report["failed"])
                    skipped |= {v["code"] for v in report["verdicts"] if v["status"] == "skip"}
                    for v in report["verdicts"]:
                        per_test[v["code"]].append(v["seconds"])
                figures.update(
                    switches=run.summary["switches"],
                    hcas=run.summary["cas"],
                    suite_s_median=round(statistics.median(suite_s), 2),
                    suite_s_max=round(max(suite_s), 2),
                    discovery_s_median=round(statistics.median(discovery_s), 2),
                    suite_over_discovery=round(statistics.median(suite_s) / statistics.median(discovery_s), 2),
                    per_test_s_median={code: round(statistics.median(s), 3) for code, s in per_test.items()},
                    failed=sorted(failed),
                    skipped=sorted(skipped),
                    target_s=TARGET_S,
                    met=statistics.median(suite_s) < TARGET_S,
                    loadavg_1m=round(os.getloadavg()[0], 2),
                )
        finally:
            stop_lab(fabric)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
