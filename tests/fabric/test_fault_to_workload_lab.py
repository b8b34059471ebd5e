"""A cable pulled under a reservation reaches the workload (issue 35), on the lab (a real OpenSM
over ibsim, the collector reading through the fabric's agent), a real webhook receiver, a real
Celery worker and a real slurmctld: the tenant's webhook gets ``reservation.fabric_fault`` naming
the switch port, the cause and what the console did; the node that lost its path is drained in
Slurm with the console's reason and takes no new placement; when the cable is back the node is
available again and resumed in Slurm. The time from the unplug to the webhook and to the drain
is printed (one pull; tests/benchmarks/bench_fault_reach.py measures p95)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest

from console.fabric.lab.faults import replug, unplug
from console.telemetry.collector import CollectorOptions, FabricCollector
from console.tenancy.models import Principal, Role
from scheduling.models import Node, Reservation
from scheduling.services import quotas
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, book, whole_lab_pool
from tests.needs import needs
from tests.notify.conftest import add_webhook
from tests.notify.receiver import Receiver
from tests.slurmctld import Slurmctld

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, needs("slurm"), pytest.mark.django_db(transaction=True)]
OPERATOR = Principal(None, Role.OPERATOR, None)


def drained(ctld: Slurmctld, node: str) -> tuple[bool, str]:
    """``scontrol -o show node``, read here: whether the node is drained, and why."""
    line = ctld.scontrol("-o", "show", "node", node)
    state = re.search(r" State=(\S+)", line)
    reason = re.search(r" Reason=(.+?) \[[^\]]+\]", line)
    return bool(state and "DRAIN" in state.group(1).split("+")), reason.group(1) if reason else ""


def until(predicate: Callable[[], bool], timeout: float, what: str, step: Callable[[], object] | None = None) -> float:
    """Poll (running ``step`` between polls) until ``predicate`` holds; when it did (monotonic)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not within {timeout:.0f} s"
        if step is not None:
            step()
        time.sleep(0.05)
    return time.monotonic()


def test_a_cable_pulled_under_a_reservation_reaches_the_tenant_and_slurm_and_comes_back(
    lab_fabric, worker, tenant_a, tmp_path, settings
):
    settings.NOTIFY_ALLOW_PRIVATE_URLS = True
    fabric, _lab = lab_fabric("reach")
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    reservation = book(pool, tenant_a, 16, "reach-16")
    # The worker pushes the booking's change (the reconcile task); a second push here would race it.
    until(lambda: Reservation.objects.filter(pk=reservation.pk, status=Reservation.Status.READY).exists(), 60, "ready")
    reservation.refresh_from_db()
    sm_node = fabric.config["sm_host_name"].split(" ")[0]
    node = next(n for n in sorted(reservation.placement["nodes"]) if n != sm_node)

    ctld = Slurmctld(tmp_path / "slurm")
    ctld.start(sorted(Node.objects.filter(fabric=fabric).values_list("name", flat=True)), "", node_state="UNKNOWN")
    settings.SLURM_MIRROR_CONF = str(ctld.conf)
    receiver = Receiver().start()
    add_webhook(tenant_a, receiver.url)
    collector = FabricCollector(fabric, CollectorOptions(lab_traffic=False, interval=0.2))
    collector.setup()
    try:
        collector.sweep()
        assert drained(ctld, node) == (False, "")
        pulled = time.monotonic()
        unplug(fabric, node, 1, actor=ACTOR)  # the node's first HCA's cable

        def fault() -> bool:
            bodies = [json.loads(r.body) for r in receiver.received]
            return any(
                b["type"] == "reservation.fabric_fault" and b["data"]["fault"]["kind"] == "link_down" for b in bodies
            )

        heard = until(fault, 30, "the tenant's webhook", step=collector.sweep)
        down = until(lambda: drained(ctld, node)[0], 30, "the drain in Slurm", step=collector.sweep)
        body = next(json.loads(r.body) for r in receiver.received if b"link_down" in r.body)
        assert body["data"]["reservation"]["id"] == reservation.pk
        leaf, port = collector.lm.node_uplinks[node][1]
        assert body["data"]["fault"]["port"] == f"{leaf}/{port}"
        assert body["data"]["fault"]["action"].startswith("the subnet manager routes around the link")
        assert drained(ctld, node)[1] == f"ibconsole: link {leaf}/{port} down (1 of 8 of its ports)"
        assert Node.objects.get(fabric=fabric, name=node).state == Node.State.DRAINING  # no new placement
        print(f"unplug → webhook {heard - pulled:.2f} s, → Slurm drain {down - pulled:.2f} s")

        replug(fabric, node, 1, actor=ACTOR)
        until(lambda: not drained(ctld, node)[0], 30, "the resume in Slurm", step=collector.sweep)
        assert Node.objects.get(fabric=fabric, name=node).state == Node.State.AVAILABLE
    finally:
        collector.close()
        receiver.stop()
        ctld.stop()
