"""Power actions against a real Redfish BMC (sushy-emulator): a node goes powering-off → off and
powering-on → on as the BMC reports, a failure is recorded as such, and a reservation that needs
the node within its boot time plus margin refuses the power-off.

    [sushy-emulator] <-- Redfish (sushy) -- console.power.services.drive
"""

from __future__ import annotations

import datetime as dt

import pytest

from console.power import services
from console.power.models import PowerEvent
from console.power.signals import power_state_changed
from console.tenancy.errors import Conflict
from console.tenancy.models import AuditEntry
from scheduling.models import Node
from tests.power.conftest import SYSTEM_ACTOR, drive_to_end, emulator_power, reserve_node
from tests.scheduling.conftest import make_fabric

pytestmark = pytest.mark.django_db


@pytest.fixture
def nodes(db):
    fabric = make_fabric("pw", {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100"})
    return list(Node.objects.filter(fabric=fabric).order_by("pk"))


def test_power_off_then_on_follows_the_bmc(nodes, attach_bmc, redfish, django_capture_on_commit_callbacks):
    # given a powered-on node with a Redfish BMC
    node = nodes[0]
    bmc = attach_bmc(node)
    assert emulator_power(redfish, bmc) == "On"
    changes: list[tuple[int, str]] = []

    def listen(sender, node_id, state, **kw):
        changes.append((node_id, state))

    power_state_changed.connect(listen)
    try:
        # when an operator powers it off (the task runs as a worker would)
        with django_capture_on_commit_callbacks(execute=True):
            services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
        node.refresh_from_db()
        assert node.power_state == "powering-off"
        with django_capture_on_commit_callbacks(execute=True):
            state = drive_to_end(node.pk, "off")
        # then the BMC itself reports Off, and so does the console
        assert state == "off"
        assert emulator_power(redfish, bmc) == "Off"
        node.refresh_from_db()
        assert node.power_state == "off" and node.power_changed_at is not None

        # when it is powered on again
        with django_capture_on_commit_callbacks(execute=True):
            services.power_on(node.pk, actor=SYSTEM_ACTOR, reason="needed", enqueue=False)
            drive_to_end(node.pk, "on")
        assert emulator_power(redfish, bmc) == "On"
        node.refresh_from_db()
        assert node.power_state == "on"
    finally:
        power_state_changed.disconnect(listen)

    history = list(
        PowerEvent.objects.filter(node=node).order_by("at", "pk").values_list("to_state", "intended", "actor")
    )
    assert history == [
        ("powering-off", True, "tests"),
        ("off", True, "bmc"),
        ("powering-on", True, "tests"),
        ("on", True, "bmc"),
    ]
    assert changes == [(node.pk, s) for s in ("powering-off", "off", "powering-on", "on")]
    assert AuditEntry.objects.filter(action="node.power_off", object_id=str(node.pk)).exists()


def test_force_off_uses_forceoff(nodes, attach_bmc, redfish):
    node = nodes[1]
    bmc = attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, force=True, enqueue=False)
    assert drive_to_end(node.pk, "force-off") == "off"
    assert emulator_power(redfish, bmc) == "Off"


def test_bmc_that_does_not_get_there_in_time_is_a_failure(nodes, attach_bmc, redfish):
    # given a BMC whose transition takes longer (the emulator applies a reset 1 to 11 s later)
    # than the console allows (no time at all: one status read right after the reset)
    node = nodes[2]
    attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    # when the task gives up
    state = drive_to_end(node.pk, "off", timeout_s=0)
    # then the node is failed, recorded as not intended
    node.refresh_from_db()
    assert state == node.power_state == "failed"
    last = PowerEvent.objects.filter(node=node).first()
    assert last is not None and last.to_state == "failed" and not last.intended and "still reports" in last.reason


def test_unreachable_bmc_is_a_failure(nodes, attach_bmc, redfish):
    node = nodes[3]
    attach_bmc(node, password="wrong-password")
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    assert drive_to_end(node.pk, "off", timeout_s=5) == "failed"
    last = PowerEvent.objects.filter(node=node).first()
    assert last is not None and not last.intended and "401" in last.reason


def test_no_power_off_while_a_reservation_starts_within_boot_time(nodes, attach_bmc, redfish):
    # given a reservation on the node starting in 5 minutes (DGX-H100 boots in 420 s, + 300 s margin)
    node = nodes[0]
    bmc = attach_bmc(node)
    reservation = reserve_node(node, dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5))
    # when an operator tries to power it off, gracefully or by force
    for force in (False, True):
        with pytest.raises(services.NodeNeeded) as refused:
            services.power_off(node.pk, actor=SYSTEM_ACTOR, force=force, enqueue=False)
        # then it is refused, naming the reservation, and nothing changed
        assert refused.value.fields["reservations"] == [reservation.pk]
    node.refresh_from_db()
    assert node.power_state == "on"
    assert not PowerEvent.objects.filter(node=node).exists()
    assert emulator_power(redfish, bmc) == "On"


def test_a_reservation_beyond_boot_time_does_not_block(nodes, attach_bmc):
    node = nodes[1]
    attach_bmc(node)
    reserve_node(node, dt.datetime.now(dt.UTC) + dt.timedelta(hours=3))
    services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    node.refresh_from_db()
    assert node.power_state == "powering-off"


def test_without_bmc_there_is_no_power_action(nodes):
    with pytest.raises(services.Invalid):
        services.power_off(nodes[0].pk, actor=SYSTEM_ACTOR, enqueue=False)


def test_a_transition_nobody_carried_out_is_reaped_as_failed(nodes, attach_bmc):
    # given two nodes going off, one for longer than its boot time + margin + slack
    stale, fresh = nodes[0], nodes[1]
    for node in (stale, fresh):
        attach_bmc(node)
        services.power_off(node.pk, actor=SYSTEM_ACTOR, enqueue=False)
    long_ago = dt.datetime.now(dt.UTC) - services.boot_time(stale) - services.MARGIN - dt.timedelta(minutes=2)
    Node.objects.filter(pk=stale.pk).update(power_changed_at=long_ago)
    # when the reaper runs
    assert services.reap_stuck() == [stale.pk]
    # then only the stale one is failed, and a late task leaves it alone
    assert Node.objects.get(pk=stale.pk).power_state == "failed"
    assert Node.objects.get(pk=fresh.pk).power_state == "powering-off"
    assert services.drive(stale.pk, "off") == "failed"
    last = PowerEvent.objects.filter(node=stale).first()
    assert last is not None and not last.intended and "no BMC answer" in last.reason


def test_wake_boots_only_off_nodes_with_a_bmc(nodes, attach_bmc, redfish, django_capture_on_commit_callbacks):
    # given an off node and a failed node with BMCs, an on node, and an off node without a BMC
    off, failed, on, bare = nodes
    for node in (off, failed, on):
        attach_bmc(node)
    Node.objects.filter(pk__in=[off.pk, bare.pk]).update(power_state=Node.Power.OFF)
    Node.objects.filter(pk=failed.pk).update(power_state=Node.Power.FAILED)
    # when scheduling wants all four for a reservation
    with django_capture_on_commit_callbacks(execute=False) as published:
        started = services.wake([n.pk for n in nodes], reason="reservation 7 starts soon")
    # then the two with a BMC that are not on start booting, each with its drive task published
    assert started == [off.pk, failed.pk]
    assert {n.pk: n.power_state for n in Node.objects.filter(pk__in=[x.pk for x in nodes])} == {
        off.pk: "powering-on",
        failed.pk: "powering-on",
        on.pk: "on",
        bare.pk: "off",
    }
    assert len(published) == 2 * 2  # the signal and the task, per node
    # and a second wish while they boot starts nothing
    assert services.wake([n.pk for n in nodes], reason="again") == []


def test_no_power_on_while_powering_off_and_no_graceful_off_while_booting(nodes, attach_bmc):
    node = nodes[0]
    attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    with pytest.raises(Conflict) as refused:
        services.power_on(node.pk, actor=SYSTEM_ACTOR, reason="too soon", enqueue=False)
    assert refused.value.code == "power_in_progress"
    Node.objects.filter(pk=node.pk).update(power_state=Node.Power.OFF)
    services.power_on(node.pk, actor=SYSTEM_ACTOR, reason="needed", enqueue=False)
    with pytest.raises(Conflict) as refused:
        services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="changed my mind", enqueue=False)
    assert refused.value.code == "power_in_progress"
    # forcing it off is still possible (a hung boot)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="hung", force=True, enqueue=False)
    assert Node.objects.get(pk=node.pk).power_state == Node.Power.POWERING_OFF
