"""Reservations waiting on power, against a real Redfish BMC (sushy-emulator):

- a failed node is powered on again twice, with backoff, then stays failed and the waiting
  reservation is told once;
- a node placement took while it was powering off boots as soon as the BMC reports it off;
- a node settling off reconciles its fabric (its ports are down);
- the grant's wish names its reservation; a receiver of ``power_wanted`` that raises reaches
  neither the other receivers nor the caller.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import F

from console.fabric import enqueue
from console.notify.models import Event
from console.power import services
from console.power.models import PowerEvent
from scheduling.models import Node
from scheduling.services import power
from tests.power.conftest import SYSTEM_ACTOR, drive_to_end, reserve_node
from tests.scheduling.conftest import make_fabric

pytestmark = pytest.mark.django_db

#: DGX-H100: 420 s boot; placement's margin is 120 s. A start this far ahead lets placement take
#: an off (or powering-off) node and makes the grant boot it right away.
JUST_BOOTABLE = dt.timedelta(seconds=570)


@pytest.fixture
def nodes(db):
    fabric = make_fabric("wake", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    return list(Node.objects.filter(fabric=fabric).order_by("pk"))


@pytest.fixture
def drives(monkeypatch):
    """The ``power.drive`` tasks published (node, action), instead of sent to a broker."""
    sent: list[tuple[int, str]] = []
    monkeypatch.setattr(services, "_publish", lambda node_id, action: sent.append((node_id, action)))
    return sent


@pytest.fixture
def reconciles(monkeypatch):
    published: list[int] = []
    monkeypatch.setattr(enqueue, "publish_reconcile", published.append)
    return published


def _state(node: Node) -> str:
    return Node.objects.get(pk=node.pk).power_state


def test_a_failed_node_is_retried_twice_with_backoff_then_the_reservation_is_told(
    nodes, attach_bmc, drives, django_capture_on_commit_callbacks
):
    # given a reservation starting in 5 minutes on a node whose BMC refuses us, and that went off
    node = nodes[0]
    attach_bmc(node, password="wrong-password")
    reservation = reserve_node(node, dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5))
    Node.objects.filter(pk=node.pk).update(power_state=Node.Power.OFF, power_changed_at=dt.datetime.now(dt.UTC))

    def tick_after(seconds: float) -> str:
        """The tick, ``seconds`` after the last failure; the node's state after it."""
        Node.objects.filter(pk=node.pk).update(power_changed_at=F("power_changed_at") - dt.timedelta(seconds=seconds))
        with django_capture_on_commit_callbacks(execute=True):
            power.wake_due()
        return _state(node)

    # when the tick wakes it: the first power-on fails
    assert tick_after(0) == "powering-on" and drives == [(node.pk, "on")]
    assert drive_to_end(node.pk, "on") == "failed"
    # then the ticks wait for the backoff, 60 s then 120 s, and retry after it
    for backoff, attempt in ((60, 2), (120, 3)):
        assert tick_after(backoff - 1) == "failed" and len(drives) == attempt - 1
        assert tick_after(2) == "powering-on" and len(drives) == attempt
        assert drive_to_end(node.pk, "on") == "failed"
    # and after the third failure it stays failed; the reservation hears of it once
    assert tick_after(3600) == tick_after(1) == "failed" and len(drives) == 3
    told = Event.objects.filter(reservation_id=reservation.pk, type="reservation.fabric_fault")
    assert told.count() == 1
    fault = told.get().payload["data"]["fault"]
    assert fault["kind"] == "node_down" and "failed to power on 3 times" in fault["message"]
    assert power.progress([reservation])[reservation.pk]["step"] == "power-failed"
    reasons = list(
        PowerEvent.objects.filter(node=node, to_state="powering-on")
        .order_by("at", "pk")
        .values_list("reason", flat=True)
    )
    assert len(reasons) == 3 and "retry 1 of 2" in reasons[1] and "retry 2 of 2" in reasons[2]
    assert all(f"reservation {reservation.pk} " in r for r in reasons)


def test_a_node_placed_while_powering_off_boots_once_it_is_off(
    nodes, attach_bmc, drives, reconciles, django_capture_on_commit_callbacks
):
    # given a node powering off (no reservation needs it yet)
    node = nodes[1]
    attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    queued: list[tuple[int, str, float]] = []
    assert services.drive(node.pk, "off", requeue=lambda *poll: queued.append(poll)) == "powering-off"
    # when a reservation is placed on it, starting just after it could boot: placement counts it
    # bootable, the grant asks for it, but a node powering off cannot take a power-on yet
    with django_capture_on_commit_callbacks(execute=True):
        reservation = reserve_node(node, dt.datetime.now(dt.UTC) + JUST_BOOTABLE)
    assert reservation.placement["power"]["woken"] is True
    assert _state(node) == "powering-off" and drives == []
    # then as soon as the BMC reports it off, it is powered on for the reservation
    with django_capture_on_commit_callbacks(execute=True):
        assert drive_to_end(node.pk, "off") == "off"
    assert _state(node) == "powering-on" and drives == [(node.pk, "on")]
    last = PowerEvent.objects.filter(node=node).first()
    assert last is not None and last.to_state == "powering-on" and f"reservation {reservation.pk} " in last.reason
    assert node.fabric_id in reconciles


def test_a_node_settling_off_reconciles_its_fabric(nodes, attach_bmc, reconciles, django_capture_on_commit_callbacks):
    node = nodes[2]
    attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    assert reconciles == []
    with django_capture_on_commit_callbacks(execute=True):
        assert drive_to_end(node.pk, "off") == "off"
    assert reconciles == [node.fabric_id]


def test_the_grant_names_the_reservation_that_wakes_the_node(
    nodes, attach_bmc, drives, django_capture_on_commit_callbacks
):
    node = nodes[3]
    attach_bmc(node)
    Node.objects.filter(pk=node.pk).update(power_state=Node.Power.OFF, power_changed_at=dt.datetime.now(dt.UTC))
    with django_capture_on_commit_callbacks(execute=True):
        reservation = reserve_node(node, dt.datetime.now(dt.UTC) + JUST_BOOTABLE)
    assert _state(node) == "powering-on" and drives == [(node.pk, "on")]
    last = PowerEvent.objects.filter(node=node).first()
    assert last is not None and last.reason == f"reservation {reservation.pk} needs it (grant)"


def test_a_power_wanted_receiver_that_raises_stops_neither_the_others_nor_the_caller(
    nodes, attach_bmc, drives, django_capture_on_commit_callbacks
):
    node = nodes[0]
    attach_bmc(node)
    Node.objects.filter(pk=node.pk).update(power_state=Node.Power.OFF, power_changed_at=dt.datetime.now(dt.UTC))

    def broken(**_: object) -> None:
        raise RuntimeError("a broken receiver")

    power.power_wanted.connect(broken, weak=False)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            power.wake_at_grant([node.pk], 4242)
    finally:
        power.power_wanted.disconnect(broken)
    assert _state(node) == "powering-on" and drives == [(node.pk, "on")]


def test_a_node_out_of_retries_tells_only_the_reservations_booked_on_it(nodes, attach_bmc, drives):
    # given two tenants' reservations waiting for power, on two different nodes, and the first
    # node failed three power-ons (its retries used up)
    failed, other = nodes[0], nodes[1]
    attach_bmc(failed)
    attach_bmc(other)
    start = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
    mine, theirs = reserve_node(failed, start), reserve_node(other, start)
    assert mine.tenant_id != theirs.tenant_id
    now = dt.datetime.now(dt.UTC)
    for minutes in (30, 20, 10):
        PowerEvent.objects.create(
            node=failed,
            from_state="powering-on",
            to_state="failed",
            at=now - dt.timedelta(minutes=minutes),
            intended=False,
            actor="bmc",
            reason="on: refused",
        )
    Node.objects.filter(pk=failed.pk).update(power_state=Node.Power.FAILED, power_changed_at=now)
    # when the periodic wake asks for it on behalf of every waiting reservation it found
    services.wake([failed.pk], reason="start", reservation_ids=[mine.pk, theirs.pk])
    # then only the reservation booked on the failed node hears of it (the other tenant is never
    # told about a host it does not hold), and nothing is sent to the BMC
    told = Event.objects.filter(type="reservation.fabric_fault")
    assert list(told.values_list("reservation_id", flat=True)) == [mine.pk]
    assert failed.name not in str(list(Event.objects.filter(tenant_id=theirs.tenant_id).values_list("payload")))
    assert drives == []
