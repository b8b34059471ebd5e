"""Placement that knows power, and reservations waiting for power (scheduling.services.power).

The 16-node fat tree of conftest (DGX-H100: the catalogue's boot time is 420 s; with the 120 s
margin a node that is off is ready 9 min after it is asked to boot). Power states are set the way
the power app reports them (``report_power``: the row, then its ``power_state_changed`` signal), or directly
on the rows for the state a test starts from.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.fabric import enqueue, hooks
from designer.builtin_catalogue import default_catalogue
from scheduling.api.serializers import ReservationSerializer
from scheduling.models import Node, Reservation, ReservationAllocation
from scheduling.placement.powerfit import BOOT_MARGIN_S
from scheduling.services import lifecycle, power, queue, reservations
from scheduling.services.snapshots import forget
from tests.scheduling.conftest import SYSTEM, give_quota, report_power, request_for, tenant_principal

pytestmark = pytest.mark.django_db
S = Reservation.Status
P = Node.Power
BOOT = default_catalogue().nodes["DGX-H100"].boot_s + BOOT_MARGIN_S


def set_power(pool, state: str, names=None) -> None:
    nodes = Node.objects.filter(pools=pool)
    if names is not None:
        nodes = nodes.filter(name__in=names)
    nodes.update(power_state=state, power_changed_at=timezone.now())
    forget()


def names(n: int, first: int = 1) -> list[str]:
    return [f"node-{i:03d}" for i in range(first, first + n)]


def reserve(tenant, pool, **kw) -> Reservation:
    return reservations.reserve(SYSTEM, tenant_principal(tenant), request_for(pool, **kw))


def powers_of(reservation: Reservation) -> set[str]:
    nodes = ReservationAllocation.objects.filter(reservation=reservation).values("node_id")
    return set(Node.objects.filter(pk__in=nodes).values_list("power_state", flat=True))


@pytest.fixture
def wanted():
    """What power_wanted carried (the power app's receiver, in the tests)."""
    got: list[dict] = []

    def receiver(sender, **kw):
        kw.pop("signal", None)
        got.append(kw)

    power.power_wanted.connect(receiver, weak=False)
    yield got
    power.power_wanted.disconnect(receiver)


def test_on_nodes_first_when_there_are_enough(pool, tenant_a):
    give_quota(tenant_a, pool, 128)
    # given leaf-01's first two nodes off (the engine's first choice when all are on)
    set_power(pool, P.OFF, names(2))
    # when 4 nodes are asked for in 2 hours, which the off nodes could boot before
    reservation = reserve(tenant_a, pool, nodes=4, start=timezone.now() + dt.timedelta(hours=2))
    # then 4 nodes that are on are taken, in one leaf group, and nothing waits for power
    assert reservation.status == S.PLACED
    assert powers_of(reservation) == {P.ON}
    assert len(reservation.placement["leaf_groups"]) == 1
    assert "power" not in reservation.placement
    assert not set(reservation.placement["nodes"]) & set(names(2))


def test_off_nodes_are_used_when_they_boot_before_a_future_start_and_it_says_so(
    pool, tenant_a, wanted, django_capture_on_commit_callbacks
):
    give_quota(tenant_a, pool, 128)
    set_power(pool, P.OFF)
    start = (timezone.now() + dt.timedelta(hours=1)).replace(second=0, microsecond=0)
    with django_capture_on_commit_callbacks(execute=True):
        reservation = reserve(tenant_a, pool, nodes=4, start=start)
    assert reservation.status == S.PLACED
    assert powers_of(reservation) == {P.OFF}
    note = reservation.placement["power"]
    assert note["message"] == f"4 of 4 nodes are powered off; they boot in 9 min, before the start at {start:%H:%M} UTC"
    assert note["before_start"] and note["nodes"] == reservation.placement["nodes"]
    # an hour ahead, booting now is not needed yet: no power_wanted at the grant
    wanted_now = [w for w in wanted if w["reason"] == "grant"]
    assert wanted_now == []


@pytest.mark.parametrize("lead_minutes", [0, 5])
def test_off_nodes_that_cannot_boot_before_the_start_are_excluded_with_the_start_after_boot(
    pool, tenant_a, lead_minutes
):
    give_quota(tenant_a, pool, 128)
    set_power(pool, P.OFF)
    before = timezone.now()
    start = None if lead_minutes == 0 else before + dt.timedelta(minutes=lead_minutes)
    reservation = reserve(tenant_a, pool, nodes=4, start=start)
    assert reservation.status == S.REJECTED
    assert reservation.explanation["reason"] == "powered_off"
    when = "now" if lead_minutes == 0 else f"{start:%H:%M} UTC"
    assert f"16 nodes are off and cannot boot before {when} (ready in 9 min): excluded" in reservation.reason
    assert "once booted they fit from" in reservation.reason
    details = reservation.explanation["details"]
    assert len(details["power_excluded_nodes"]) == details["power_excluded_count"] == 16
    earliest = dt.datetime.fromisoformat(details["earliest_start"])
    assert before + dt.timedelta(seconds=BOOT) <= earliest <= timezone.now() + dt.timedelta(seconds=BOOT)
    assert not ReservationAllocation.objects.exists()


def test_a_single_off_node_is_named(pool, tenant_a):
    give_quota(tenant_a, pool, 128)
    set_power(pool, P.FAILED, names(15, 2))
    set_power(pool, P.OFF, names(1))
    reservation = reserve(tenant_a, pool, nodes=1)
    assert reservation.status == S.REJECTED
    assert "node node-001 is off and cannot boot before now (ready in 9 min): excluded" in reservation.reason
    assert "15 failed nodes: excluded" in reservation.reason


def test_failed_nodes_are_never_used_even_for_a_far_start(pool, tenant_a):
    give_quota(tenant_a, pool, 128)
    set_power(pool, P.FAILED, names(14))
    start = timezone.now() + dt.timedelta(days=2)
    assert reserve(tenant_a, pool, nodes=3, start=start).status == S.REJECTED
    placed = reserve(tenant_a, pool, nodes=2, start=start)
    assert placed.status == S.PLACED and set(placed.placement["nodes"]) == {"node-015", "node-016"}


def test_asap_with_only_off_nodes_waits_in_powering_on_then_is_ready_after_power_and_verification(
    pool, tenant_a, wanted, monkeypatch, django_capture_on_commit_callbacks
):
    published: list[int] = []
    monkeypatch.setattr(enqueue, "publish_reconcile", published.append)
    give_quota(tenant_a, pool, 128)
    set_power(pool, P.OFF)
    # given an asap request while every node is off: queued, then the queue pass places it
    queued = queue.reserve_asap(
        SYSTEM, tenant_principal(tenant_a), request_for(pool, nodes=2, duration=dt.timedelta(hours=1))
    )
    assert queued.status == S.QUEUED
    with django_capture_on_commit_callbacks(execute=True):
        queue.queue_pass(pool.pk)
    reservation = Reservation.objects.get(pk=queued.pk)
    assert reservation.status == S.PROVISIONING
    node_ids = sorted(
        set(ReservationAllocation.objects.filter(reservation=reservation).values_list("node_id", flat=True))
    )
    # the power app is asked to boot exactly its nodes
    assert [w["node_ids"] for w in wanted if w["reason"] == "grant"] == [node_ids]
    # then the API shows the powering-on step
    step = ReservationSerializer(reservation).data["progress"]
    assert step["step"] == "powering-on" and step["nodes_waiting"] == 2
    assert step["message"].startswith("powering on: 2 of 2 nodes off or booting, expected ready ")
    # and its partition waits: not in the desired state while its nodes are off
    assert reservation.pkey not in {p["pkey"] for p in lifecycle.desired_partitions(pool.fabric_id)}

    # when the BMC reports the first node booting, then on
    report_power(node_ids[0], P.POWERING_ON)
    report_power(node_ids[0], P.ON)
    report_power(node_ids[1], P.POWERING_ON)
    step = ReservationSerializer(Reservation.objects.get(pk=reservation.pk)).data["progress"]
    assert step["message"].startswith("powering on: 1 of 2 nodes booting, expected ready ")
    # a verification of its P_Key meanwhile does not make it ready (a node is not on)
    hooks.notify_verified(pool.fabric_id, present_pkeys={reservation.pkey}, change_id=1)
    assert Reservation.objects.get(pk=reservation.pk).status == S.PROVISIONING
    assert reservation.pkey not in {p["pkey"] for p in lifecycle.desired_partitions(pool.fabric_id)}

    # when the last node is on: a reconcile is asked for, the partition is desired
    published.clear()
    with django_capture_on_commit_callbacks(execute=True):
        report_power(node_ids[1], P.ON)
    assert published == [pool.fabric_id]
    desired = {p["pkey"]: p for p in lifecycle.desired_partitions(pool.fabric_id)}
    assert len(desired[reservation.pkey]["members"]) == 16  # 2 nodes × 8 HCAs
    assert ReservationSerializer(Reservation.objects.get(pk=reservation.pk)).data["progress"]["step"] == "fabric"
    # and the fabric's verification makes it ready
    hooks.notify_verified(pool.fabric_id, present_pkeys={reservation.pkey}, change_id=2)
    reservation.refresh_from_db()
    assert reservation.status == S.READY
    assert ReservationSerializer(reservation).data["progress"] is None


def test_the_tick_wakes_off_nodes_of_a_reservation_starting_within_their_boot_time(
    pool, tenant_a, wanted, django_capture_on_commit_callbacks
):
    give_quota(tenant_a, pool, 128)
    set_power(pool, P.OFF)
    start = timezone.now() + dt.timedelta(minutes=30)
    reservation = reserve(tenant_a, pool, nodes=2, start=start)
    assert reservation.status == S.PLACED
    node_ids = sorted(
        set(ReservationAllocation.objects.filter(reservation=reservation).values_list("node_id", flat=True))
    )
    step = ReservationSerializer(reservation).data["progress"]
    assert step["step"] == "off-until-start"
    # 25 min before the start nothing is due (boot 7 min + margin 2 min + slack 1 min)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.tick(start - dt.timedelta(minutes=25))
    assert wanted == []
    # 9 min before, it is
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.tick(start - dt.timedelta(minutes=9))
    assert wanted == [{"node_ids": node_ids, "reservation_ids": [reservation.pk], "reason": "start"}]
