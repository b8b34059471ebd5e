"""Node power on the live streams: every change of a node's power state reaches the fabric's
socket as a ``node.power`` message (numbered in the group's sequence, checked against its
schema), and the socket of a tenant only when its reservation holds the node; the REST snapshot
a client resyncs from carries the same states, a tenant's only its own hosts'.

The power actions run through the power services (``enqueue=False``: no BMC is driven; the
states and the after-commit signal are the real ones)."""

from __future__ import annotations

import datetime as dt

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from console.live.schemas import check
from console.power import services
from console.tenancy.context import Actor
from scheduling.models import Node, ReservationAllocation
from tests.live.helpers import connect, messages_until

pytestmark = [pytest.mark.django_db(transaction=True)]
DESK = Actor.system("ops-desk")


def _with_bmc(node: Node) -> Node:
    services.set_bmc(node.pk, actor=DESK, data={"driver": "redfish", "address": "https://bmc.example"})
    return node


def _nodes(world) -> tuple[Node, Node]:
    """A node nobody holds, and one tenant A's reservation holds (each with a BMC)."""
    held = set(ReservationAllocation.objects.values_list("node_id", flat=True))
    free = Node.objects.filter(fabric=world["fabric"]).exclude(pk__in=held).order_by("name").first()
    mine = ReservationAllocation.objects.filter(reservation=world["res_a"]).values_list("node_id", flat=True)
    of_a = Node.objects.filter(pk__in=set(mine)).order_by("name").first()
    assert free is not None and of_a is not None
    return _with_bmc(free), _with_bmc(of_a)


async def _ready(comm) -> int:
    assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
    subscribed = await comm.receive_json_from(timeout=5)
    assert subscribed["type"] == "subscribed"
    return subscribed["seq"]


@pytest.mark.asyncio
async def test_power_changes_stream_to_the_fabric_and_to_the_holding_tenant_only(world, operator, admin_a, admin_b):
    free, of_a = await sync_to_async(_nodes)(world)
    fabric = world["fabric"].pk
    op, ok_op, _ = await connect(f"/ws/live/fabric/{fabric}/", operator)
    ten_a, ok_a, _ = await connect(f"/ws/live/tenant/{world['a'].pk}/", admin_a)
    ten_b, ok_b, _ = await connect(f"/ws/live/tenant/{world['b'].pk}/", admin_b)
    assert ok_op and ok_a and ok_b
    base = await _ready(op)
    await _ready(ten_a)
    await _ready(ten_b)

    # when an operator powers off a node nobody holds
    await sync_to_async(services.power_off)(free.pk, actor=DESK, reason="idle", enqueue=False)
    message = (await messages_until(op, lambda m: m["type"] == "node.power"))[-1]
    check(message)
    changed_at = (await sync_to_async(Node.objects.get)(pk=free.pk)).power_changed_at
    assert message == {
        "type": "node.power",
        "group": f"fabric.{fabric}",
        "seq": base + 1,
        "fabric": fabric,
        "node": free.name,
        "node_id": free.pk,
        "state": "powering-off",
        "since": changed_at.isoformat(),
        "intended": True,
    }
    # then no tenant hears of it (it names a host that is not theirs)
    assert await ten_a.receive_nothing(timeout=0.5)
    assert await ten_b.receive_nothing(timeout=0.5)

    # when tenant A's node, off, is booted for it
    await sync_to_async(Node.objects.filter(pk=of_a.pk).update)(power_state=Node.Power.OFF)
    await sync_to_async(services.power_on)(of_a.pk, actor=DESK, reason="reservation needs it", enqueue=False)
    to_op = (await messages_until(op, lambda m: m["type"] == "node.power"))[-1]
    to_a = (await messages_until(ten_a, lambda m: m["type"] == "node.power"))[-1]
    check(to_a)
    assert (to_op["node"], to_op["state"], to_op["seq"]) == (of_a.name, "powering-on", base + 2)
    assert (to_a["node"], to_a["state"], to_a["intended"], to_a["group"]) == (
        of_a.name,
        "powering-on",
        True,
        f"tenant.{world['a'].pk}",
    )
    assert await ten_b.receive_nothing(timeout=0.5)

    # when the reaper finds both stuck long after: failed, and not intended
    await sync_to_async(services.reap_stuck)(now=timezone.now() + dt.timedelta(hours=2))
    failed = await messages_until(op, lambda m: m["type"] == "node.power" and m["seq"] == base + 4)
    states = {(m["node"], m["state"], m["intended"]) for m in failed if m["type"] == "node.power"}
    assert states == {(free.name, "failed", False), (of_a.name, "failed", False)}
    for comm in (op, ten_a, ten_b):
        await comm.disconnect()


def test_snapshot_carries_power_states_a_tenant_only_its_own_hosts(world, operator, admin_a, admin_b, client_for):
    free, of_a = _nodes(world)
    services.power_off(free.pk, actor=DESK, enqueue=False)
    Node.objects.filter(pk=of_a.pk).update(power_state=Node.Power.OFF)
    services.power_on(of_a.pk, actor=DESK, enqueue=False)
    url = f"/api/telemetry/fabrics/{world['fabric'].pk}/snapshot/"
    seen = client_for(operator).get(url).json()["power"]
    assert {name: body["state"] for name, body in seen.items()} == {free.name: "powering-off", of_a.name: "powering-on"}
    assert seen[free.name]["intended"] is True and seen[free.name]["since"].endswith("+00:00")
    assert client_for(admin_a).get(url).json()["power"] == {of_a.name: seen[of_a.name]}
    assert client_for(admin_b).get(url).json()["power"] == {}
