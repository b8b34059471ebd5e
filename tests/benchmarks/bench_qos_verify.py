"""Benchmark: reading SL2VL and VLArb back from every port after a QoS push, against the real lab.

The design: the demo ``superpod-su1`` (32 DGX H100 = 256 HCAs, 8 rail leaves, 4 spines; or
``--design superpod-2048``). The lab starts with the default QoS table's options in
``opensm.conf``; the benchmark then times what the push's ``verify-vl`` step does: one
ibnetdiscover, then SL2VL (every input port of each switch output port) and both VL arbitration
tables of every HCA port and every cabled switch port, compared with the rendered options (every
port must match): through the MAD helper (one request, MADs pipelined) and, for comparison, with
``smpquery sl2vl`` + ``smpquery vlarb`` processes ``--workers`` at a time (``--no-smpquery``
skips that). Median of ``--runs``.

Run: ``.venv/bin/python tests/benchmarks/bench_qos_verify.py [--runs 3] [--workers 4] [--no-smpquery]``
(uses ``DATABASE_URL`` like the console; migrates it first). Ends by printing ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402 - path and settings set up above for direct runs

django.setup()

from django.core.management import call_command  # noqa: E402

from console.demo import seed_designs  # noqa: E402
from console.fabric.diags.mad import MadSession  # noqa: E402
from console.fabric.drivers.conf_files import conf_artefacts  # noqa: E402
from console.fabric.lab.fabrics import INSTALL_HINT, missing_packages, start_lab, stop_lab  # noqa: E402
from console.fabric.opensm.qos import QosPolicy  # noqa: E402
from console.fabric.opensm.qos_table import DEFAULT_TABLE  # noqa: E402
from console.fabric.opensm.qos_verify import ports_to_check, verify_qos_tables  # noqa: E402
from console.tenancy.context import Actor  # noqa: E402
from designer.models import DesignRevision  # noqa: E402

ACTOR = Actor.system("bench-qos")


def timed(runs: int, verify: Callable[[], list[str]]) -> list[float]:
    """Wall times of ``runs`` full read-backs; every one must find every port as rendered."""
    times = []
    for _ in range(runs):
        t = time.monotonic()
        mismatches = verify()
        times.append(time.monotonic() - t)
        assert not mismatches, mismatches[:5]
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--design", default="superpod-su1")
    parser.add_argument("--no-smpquery", action="store_true", help="time the MAD helper only")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if missing_packages():
        sys.exit(f"the lab needs {', '.join(missing_packages())}: {INSTALL_HINT}")
    seed_designs(ACTOR)
    revision = DesignRevision.objects.filter(design__name=args.design).order_by("-number").first()
    assert revision is not None, args.design
    options = DEFAULT_TABLE.options()
    figures: dict[str, object] = {"benchmark": "qos_verify", "design": args.design, "workers": args.workers}
    with tempfile.TemporaryDirectory(prefix="bench-qos-") as tmp:
        fabric, lab = start_lab(revision, name="bench-qos", actor=ACTOR, workdir=Path(tmp) / "lab")
        try:
            lab.artefacts.swap(conf_artefacts(lab.artefacts, QosPolicy(), options, None))
            lab.restart_sm(wait=True)  # qos_policy_file is not reloadable
            diags = lab.diags(timeout=30)
            ports = ports_to_check(diags.ibnetdiscover())
            with MadSession(lab.diag_env(), timeout=120) as mad:
                used: list[str] = []

                def by_mad() -> list[str]:
                    return verify_qos_tables(diags, ports, options, mad=mad, mad_timeout=120, used=used)

                deadline = time.monotonic() + 60
                while by_mad():  # OpenSM programs the ports on its first sweep after the restart
                    assert time.monotonic() < deadline, "OpenSM did not program the ports"
                mad_times = timed(args.runs, by_mad)
                assert set(used) == {"MAD helper"}, used  # no silent fall-back to processes
            figures.update(
                ports=len(ports),
                switch_ports=sum(p.switch for p in ports),
                hca_ports=sum(not p.switch for p in ports),
                mad_s_median=round(statistics.median(mad_times), 2),
                mad_s_max=round(max(mad_times), 2),
            )
            if not args.no_smpquery:
                times = timed(args.runs, lambda: verify_qos_tables(diags, ports, options, workers=args.workers))
                figures.update(
                    smpquery_s_median=round(statistics.median(times), 2), smpquery_s_max=round(max(times), 2)
                )
            figures["loadavg_1m"] = round(os.getloadavg()[0], 2)
        finally:
            stop_lab(fabric)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
