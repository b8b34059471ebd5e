"""Benchmark: how long a standby OpenSM takes to become master when the master dies, on the lab.

The lab of the 1-SU design (32 DGX H100, 256 HCAs, 12 switches) with a standby OpenSM on a
second CA (``lab up --standby-sm``). Each round kills the master OpenSM (SIGKILL) and times from
the kill to the standby's own port answering SMInfo MASTER (``sminfo -D 0`` through
infiniband-diags), then restarts the dead one as standby. Two configurations alternate in the
same process: the SMInfo polling the console sets (:mod:`console.fabric.opensm.ha`: 1,000 ms × 3)
and OpenSM's defaults (10,000 ms × 4, the baseline), each written into both SMs' opensm.conf and
applied with SIGHUP (both options are reloadable). Median of ``--rounds`` (the baseline: ``--baseline-rounds``, one by default: it takes a minute).

Run: ``.venv/bin/python tests/benchmarks/bench_sm_failover.py [--rounds 3] [--baseline-rounds 1]``
(the design catalogue is read from ``DATABASE_URL``, migrated first). Ends by printing ONE JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402 - path and settings set up above for direct runs

django.setup()

from django.core.management import call_command  # noqa: E402

from console.fabric.lab.manager import Lab  # noqa: E402
from console.fabric.lab.plan import design_spec, lab_plan  # noqa: E402
from console.fabric.lab.sms import PRIMARY, STANDBY  # noqa: E402
from console.fabric.opensm import ha  # noqa: E402
from designer.services import preview  # noqa: E402

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
DEFAULTS = (10000, 4)  # OpenSM's own sminfo_polling_timeout, polling_retry_number


def set_polling(lab: Lab, polling: tuple[int, int], priorities: dict[str, int]) -> None:
    """Write the polling settings (and each SM's priority) into both SMs' opensm.conf; SIGHUP."""
    for sm in lab.sms:
        path = lab.store_of(sm).path("opensm.conf")
        text = path.read_text()
        for key, value in (
            ("sminfo_polling_timeout", polling[0]),
            ("polling_retry_number", polling[1]),
            ("sm_priority", priorities[sm]),
        ):
            text = re.sub(rf"(?m)^{key} .*$", f"{key} {value}", text)
        path.write_text(text)
        if lab.sm_alive(sm):
            lab.reload(sm)


def until(predicate, seconds: float) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > seconds:
            raise SystemExit(f"not within {seconds} s")
        time.sleep(0.05)
    return time.monotonic() - started


def one_round(lab: Lab, polling: tuple[int, int]) -> float:
    """Kill the master; seconds until the other answers MASTER. The dead one comes back standby."""
    master = next(sm for sm in lab.sms if lab.sm_role(sm)["state"] == "MASTER")
    other = STANDBY if master == PRIMARY else PRIMARY
    # the console's priorities: the master 14, the standby 13
    set_polling(lab, polling, {master: ha.MASTER_PRIORITY, other: ha.STANDBY_PRIORITY})
    until(lambda: lab.sm_role(other)["state"] == "STANDBY", 30)
    time.sleep(2 * polling[0] / 1000)  # the standby polls the master under the new settings
    killed = time.monotonic()
    lab.kill_sm(master)
    until(lambda: lab.sm_role(other, timeout=1.0)["state"] == "MASTER", 120)
    took = time.monotonic() - killed
    lab.reap_dead_clients()
    set_polling(lab, polling, {master: ha.STANDBY_PRIORITY, other: ha.TAKEOVER_PRIORITY})
    lab.restart_sm(sm=master)
    until(lambda: lab.sm_role(master)["state"] == "STANDBY", 60)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--baseline-rounds", type=int, default=1, help="rounds with OpenSM's default polling (about 60 s each; 0: none)"
    )
    args = parser.parse_args()
    call_command("migrate", verbosity=0)  # the design catalogue is read from the database
    graph = preview(ONE_SU).graph
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        spec = design_spec(lab_plan(graph), Path(tmp).resolve(), f"bf-{os.getpid()}", standby=True)
        lab = Lab.start(spec)
        try:
            console = (ha.SMINFO_POLLING_MS, ha.POLLING_RETRIES)
            rounds: dict[str, list[float]] = {"console": [], "defaults": []}
            for i in range(args.rounds):
                rounds["console"].append(one_round(lab, console))
                if i < args.baseline_rounds:
                    rounds["defaults"].append(one_round(lab, DEFAULTS))
                print(json.dumps({k: [round(v, 2) for v in vs] for k, vs in rounds.items()}), file=sys.stderr)
        finally:
            lab.stop()
    out = {
        "rounds": args.rounds,
        "polling_ms": console[0],
        "polling_retries": console[1],
        "takeover_p50_s": round(statistics.median(rounds["console"]), 2),
        "takeover_max_s": round(max(rounds["console"]), 2),
        "takeover_s": [round(v, 2) for v in rounds["console"]],
    }
    if rounds["defaults"]:
        base = statistics.median(rounds["defaults"])
        out.update(baseline_takeover_p50_s=round(base, 2), ratio=round(out["takeover_p50_s"] / base, 3))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
