"""The 128-GPU grant through the SM host's agent against the direct driver, in one run.

The demo's 2,048-GPU design runs as a lab; uvicorn serves the console (``/ws/agent/``, Redis
channel layer) and the lab's agent (``manage.py agent --lab``, started as ``manage.py up`` starts
it: without DATABASE_URL or REDIS_URL) serves the lab's OpenSM (``benchconsole.py``). Each round grants a new 128-GPU partition (16 DGX nodes × 8 HCAs) and
releases it, once through the agent (``AgentDriver``: the request over the channel layer and the
agent's socket, the push on the agent, every step reported back) and once with the OpenSM driver
in this process (``LabHost``), the order alternating. Figures: medians, and the median of the
per-round differences (agent − direct). Target: the agent adds at most 100 ms to the median.
Then the live collector's whole-fabric sweep reading through the agent against reading the lab
in this process, alternating (``--sweeps`` each): medians and their ratio.

Run: ``DATABASE_URL=… REDIS_URL=… .venv/bin/python tests/benchmarks/bench_agent.py [--runs 7]``.
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
from console.fabric.drivers.agent import AgentDriver  # noqa: E402
from console.fabric.drivers.base import DesiredFabric  # noqa: E402
from console.fabric.drivers.hosts import LabHost  # noqa: E402
from console.fabric.drivers.opensm import OpenSmDriver  # noqa: E402
from console.fabric.lab.fabrics import lab_for, start_lab, stop_lab  # noqa: E402
from console.fabric.models import Fabric  # noqa: E402
from console.fabric.opensm.lint import format_guid  # noqa: E402
from console.fabric.opensm.push_types import PushOptions  # noqa: E402
from console.telemetry.collector import CollectorOptions, FabricCollector  # noqa: E402
from console.tenancy.context import Actor  # noqa: E402
from designer.models import DesignRevision  # noqa: E402
from designer.services import revision_graph  # noqa: E402

DESIGN = "superpod-2048"
ACTOR = Actor.system("bench-agent")
TARGET_ADDED_S = 0.1


def desired(i: int, members: list[int]) -> DesiredFabric:
    """The desired state of one grant (or, with no members, of its release) as the console stores it."""
    partitions = [
        {
            "name": "Default",
            "pkey": "0x7fff",
            "ipoib": True,
            "sl": 0,
            "source": "default",
            "members": [["ALL", "limited"], ["ALL_SWITCHES", "full"], ["SELF", "full"]],
        },
    ]
    if members:
        partitions.append(
            {
                "name": f"bench{i}",
                "pkey": f"{0x0100 + i:#06x}",
                "ipoib": False,
                "sl": 0,
                "source": "manual",
                "members": [[format_guid(g), "full"] for g in members],
            }
        )
    return DesiredFabric.from_json(
        {"partitions": partitions, "qos": {"default_sl": 0, "classes": []}, "port_admin": []}
    )


class OnTheSmHost(FabricCollector):
    """The collector reading the lab from this process, as one on the SM host itself would (the
    console before the agents): the baseline."""

    through_agent = False

    def _local_host(self):
        return LabHost(lab_for(self.fabric))


def collector_sweeps(fabric: Fabric, sweeps: int) -> dict[str, float]:
    """The live collector's whole-fabric sweep (4,096 links, the traffic model on) reading through
    the agent against reading the lab here, alternating; medians and the ratio."""
    collectors = {
        "direct": OnTheSmHost(fabric, CollectorOptions(interval=1.0)),
        "agent": FabricCollector(fabric, CollectorOptions(interval=1.0)),
    }
    cycles: dict[str, list[float]] = {"agent": [], "direct": []}
    published: dict[str, list[float]] = {"agent": [], "direct": []}
    try:
        for collector in collectors.values():
            collector.setup()
            collector.sweep()  # the first sweep reads every port's state: not measured
        for i in range(sweeps):
            for way in ("agent", "direct") if i % 2 == 0 else ("direct", "agent"):
                report = collectors[way].sweep()
                cycles[way].append(report.cycle_s)
                published[way].append(report.publish_s)
    finally:
        for collector in collectors.values():
            collector.close()
    agent, direct = statistics.median(cycles["agent"]), statistics.median(cycles["direct"])
    return {
        "sweep_agent_s_median": round(agent, 3),
        "sweep_direct_s_median": round(direct, 3),
        "sweep_agent_over_direct": round(agent / direct, 3),
        "publish_agent_s_median": round(statistics.median(published["agent"]), 3),
        "publish_direct_s_median": round(statistics.median(published["direct"]), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sweeps", type=int, default=20, help="collector sweeps each way")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    seed_designs(ACTOR)
    revision = DesignRevision.objects.filter(design__name=DESIGN).order_by("-number").first()
    nodes = list(revision_graph(revision).nodes.values())
    figures: dict[str, object] = {
        "benchmark": "agent",
        "design": DESIGN,
        "runs": args.runs,
        "loadavg_1m_start": round(os.getloadavg()[0], 2),
    }
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        base = Path(tmp)
        fabric, lab = start_lab(revision, name="bench-agent-2048", actor=ACTOR, workdir=base / "lab")
        try:
            with console_with_agent(fabric, base, ACTOR):  # the lab's agent, as `manage.py up` runs it
                drivers = {"agent": AgentDriver(fabric), "direct": OpenSmDriver(LabHost(lab))}
                options = PushOptions(non_member_sample=8)
                grants: dict[str, list[float]] = {"agent": [], "direct": []}
                for i in range(args.runs):
                    members = [g for n in nodes[(i * 16) % len(nodes) :][:16] for g in n.port_guids]
                    order = ("agent", "direct") if i % 2 == 0 else ("direct", "agent")
                    for j, way in enumerate(order):
                        key = 2 * i + j
                        t = time.monotonic()
                        result = drivers[way].push(desired(key, members), options=options)
                        grants[way].append(time.monotonic() - t)
                        assert result.outcome == "verified", (way, result.mismatches)
                        released = drivers[way].push(desired(key, []), options=options)
                        assert released.ok, (way, released.mismatches)
                figures.update(collector_sweeps(fabric, args.sweeps))
                added = [a - d for a, d in zip(grants["agent"], grants["direct"], strict=True)]
                figures.update(
                    grant_agent_s_median=round(statistics.median(grants["agent"]), 3),
                    grant_direct_s_median=round(statistics.median(grants["direct"]), 3),
                    agent_added_s_median=round(statistics.median(added), 3),
                    agent_added_s_max=round(max(added), 3),
                )
        finally:
            stop_lab(fabric)
    figures["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    figures["target_added_s"] = TARGET_ADDED_S
    figures["target_met"] = figures["agent_added_s_median"] <= TARGET_ADDED_S  # type: ignore[operator]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
