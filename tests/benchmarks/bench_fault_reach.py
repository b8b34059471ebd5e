"""Benchmark: from a cable pulled on the wire to the tenant's webhook and the node's drain in Slurm.

The demo's 1-SU design (``superpod-su1``: 32 DGX H100, 256 HCAs) as a lab, its agent connected to a
console served by uvicorn as ``manage.py up`` runs them (``benchconsole.py``); a reservation of 16
GPUs with a tenant's webhook on a stdlib receiver; a real slurmctld the Slurm mirror drives; a
Celery worker in this process (solo pool: deliveries and the mirror); the collector sweeping every
``--interval`` seconds in a thread, as ``manage.py collector`` does. Each round pulls another
cable of the reservation's nodes (a cable pulled again and again is one ``link_flapping`` alarm,
not a new fault each time) and times the unplug → the webhook's
``reservation.fabric_fault`` (``link_down``) arriving, and → the node drained in Slurm; then puts
the cable back and waits for the resume. Figures: p50 and p95 of each over ``--rounds``, and the
collector's own interval as the floor they include. Target: both under 5 s at p95.

Run: ``DATABASE_URL=… REDIS_URL=… .venv/bin/python tests/benchmarks/bench_fault_reach.py [--rounds 10]``.
Ends by printing ONE JSON line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402 - path and settings set up above for direct runs

django.setup()

from benchconsole import console_with_agent  # noqa: E402
from benchutil import pct  # noqa: E402
from celery.contrib.testing.worker import start_worker  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from console.celery import app  # noqa: E402
from console.demo import seed_designs  # noqa: E402
from console.fabric import changes  # noqa: E402
from console.fabric.lab.fabrics import INSTALL_HINT, missing_packages, start_lab, stop_lab  # noqa: E402
from console.fabric.lab.faults import replug, unplug  # noqa: E402
from console.fabric.models import ChangeRequest  # noqa: E402
from console.notify import services as notify  # noqa: E402
from console.notify.models import all_event_types  # noqa: E402
from console.telemetry.collector import CollectorOptions, FabricCollector  # noqa: E402
from console.tenancy.context import Actor  # noqa: E402
from console.tenancy.models import Principal, Role, Tenant  # noqa: E402
from designer.models import DesignRevision  # noqa: E402
from scheduling.models import Node, Pool, Reservation  # noqa: E402
from scheduling.services import inventory, quotas  # noqa: E402
from scheduling.services.reservations import ReservationRequest, reserve  # noqa: E402
from tests.notify.receiver import Receiver  # noqa: E402
from tests.slurmctld import Slurmctld  # noqa: E402

DESIGN = "superpod-su1"
ACTOR = Actor.system("bench-fault-reach")
OPERATOR = Principal(None, Role.OPERATOR, None)
TARGET_P95_S = 5.0


def drained(ctld: Slurmctld, node: str) -> bool:
    state = re.search(r" State=(\S+)", ctld.scontrol("-o", "show", "node", node))
    return bool(state and "DRAIN" in state.group(1).split("+"))


def resumed(ctld: Slurmctld, node: str) -> bool:
    return not drained(ctld, node)


def fault_after(receiver: Receiver, seen: int) -> bool:
    """A ``link_down`` fault among the requests after the first ``seen``."""
    return any(b"link_down" in r.body for r in receiver.received[seen:])


def wait(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "") -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)
    return time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="at most 16: one per cable of the reservation")
    parser.add_argument("--interval", type=float, default=1.0, help="the collector's sweep interval")
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    if missing_packages():
        sys.exit(f"the lab needs {', '.join(missing_packages())}: {INSTALL_HINT}")
    settings.NOTIFY_ALLOW_PRIVATE_URLS = True
    seed_designs(ACTOR)
    revision = DesignRevision.objects.filter(design__name=DESIGN).order_by("-number").first()
    assert revision is not None, DESIGN
    # an earlier run's reservations and marks (its nodes share these names in Slurm) end first
    earlier = {"fabric__name__startswith": "bench-reach-"}
    Reservation.objects.filter(status__in=Reservation.HOLDING, **earlier).update(status=Reservation.Status.RELEASED)
    Node.objects.filter(**earlier).update(path_lost="")
    tenant, _ = Tenant.objects.get_or_create(slug="bench-reach", defaults={"name": "bench reach"})
    with tempfile.TemporaryDirectory(prefix="bench-reach-") as tmp:
        base = Path(tmp)
        name = f"bench-reach-{uuid.uuid4().hex[:6]}"
        fabric, _lab = start_lab(revision, name=name, actor=ACTOR, workdir=base / "lab")
        ctld = Slurmctld(base / "slurm")
        receiver = Receiver().start()
        try:
            with console_with_agent(fabric, base, ACTOR), start_worker(app, pool="solo", perform_ping_check=False):
                inventory.import_inventory(fabric, actor=ACTOR)
                nodes = list(Node.objects.filter(fabric=fabric))
                pool = inventory.create_pool(
                    ACTOR, OPERATOR, fabric=fabric, name="reach", kind=Pool.Kind.BY_SU, nodes=nodes
                )
                quotas.set_quota(ACTOR, OPERATOR, tenant=tenant, pool=pool, guaranteed_gpus=64)
                request = ReservationRequest(
                    pool_id=pool.pk, gpus=16, duration=dt.timedelta(hours=2), name="reach", tenant_id=tenant.pk
                )
                reservation = reserve(ACTOR, OPERATOR, request)
                change = changes.reconcile(fabric, actor=ACTOR)  # the worker in this process pushes it
                if change is not None:
                    wait(lambda: ChangeRequest.objects.get(pk=change.pk).status == "applied", 120, "the push")
                notify.create_webhook(
                    ACTOR,
                    Principal(None, Role.TENANT_ADMIN, tenant.pk),
                    tenant=tenant,
                    name="reach",
                    url=receiver.url,
                    events=all_event_types(),
                    secret="bench-secret-bench-secret",
                )
                ctld.start(sorted(n.name for n in nodes), "", node_state="UNKNOWN")
                settings.SLURM_MIRROR_CONF = str(ctld.conf)
                sm_node = fabric.config["sm_host_name"].split(" ")[0]
                reservation.refresh_from_db()
                # each round a different cable (a link pulled again and again is one flapping alarm)
                cables = [(n, p) for p in range(1, 9) for n in sorted(reservation.placement["nodes"]) if n != sm_node]
                collector = FabricCollector(fabric, CollectorOptions(lab_traffic=False, interval=args.interval))
                collector.setup()
                stop = threading.Event()
                sweeping = threading.Thread(target=collector.run, kwargs={"stop": stop.is_set}, daemon=True)
                sweeping.start()
                to_hook: list[float] = []
                to_drain: list[float] = []
                try:
                    for node, port in cables[: args.rounds]:
                        seen = len(receiver.received)
                        pulled = time.monotonic()
                        unplug(fabric, node, port, actor=ACTOR)
                        heard = wait(functools.partial(fault_after, receiver, seen), what="the webhook")
                        down = wait(functools.partial(drained, ctld, node), what="the drain")
                        to_hook.append(heard - pulled)
                        to_drain.append(down - pulled)
                        replug(fabric, node, port, actor=ACTOR)
                        wait(functools.partial(resumed, ctld, node), what="the resume")
                finally:
                    stop.set()
                    sweeping.join(30)
                    collector.close()
            figures = {
                "benchmark": "fault_reach",
                "design": DESIGN,
                "rounds": args.rounds,
                "collector_interval_s": args.interval,
                "webhook_s_p50": round(statistics.median(to_hook), 2),
                "webhook_s_p95": round(pct(to_hook, 95), 2),
                "drain_s_p50": round(statistics.median(to_drain), 2),
                "drain_s_p95": round(pct(to_drain, 95), 2),
                "target_p95_s": TARGET_P95_S,
                "met": max(pct(to_hook, 95), pct(to_drain, 95)) < TARGET_P95_S,
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        finally:
            receiver.stop()
            ctld.stop()
            stop_lab(fabric)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
