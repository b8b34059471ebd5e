"""On a lab fabric (OpenSM on ibsim) a node's HCA cables are pulled when its BMC reports it off
and put back when it reports it on. The ports are read from the other end of each cable, the
leaf switch port, with ``smpquery portinfo`` routed by OpenSM's LIDs (not the directed route the
power code reads back with).

    [su01-leaf-rN][p] ---- [node HCA-N]     ×8 rails

A reservation placed on a powered-off node boots it through its BMC and is ready only once the
node is on and the reservation's P_Key is read back from the node's HCA ports.
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from console.fabric import changes, enqueue
from console.fabric.changes.desired import applied_of, present_pkeys
from console.fabric.changes.pipeline import apply_change
from console.fabric.lab import faults
from console.fabric.models import ChangeRequest
from console.power import services
from console.telemetry.linkmap import build_link_map
from console.tenancy.models import Principal, Role
from designer.services import revision_graph
from scheduling.models import Node, Pool, Reservation
from scheduling.services import inventory, lifecycle, queue, quotas, reservations
from scheduling.services.reservations import ReservationRequest
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.power.conftest import SYSTEM_ACTOR, drive_to_end, emulator_power

lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.django_db, pytest.mark.timeout(240)]


def _leaf_ends(fabric, lab, node: Node) -> list[tuple[int, int]]:
    """(leaf LID, leaf port) of every HCA cable of ``node``, from a discovery while they are in."""
    uplinks = build_link_map(revision_graph(fabric.revision)).node_uplinks[node.name]
    topology = lab.diags(timeout=10).ibnetdiscover()
    ends = []
    for leaf, leaf_port in uplinks.values():
        sim_id, sim_port = faults.resolve_port(fabric, leaf, leaf_port)
        ends.append((topology.nodes[sim_id].lid, sim_port))
    return ends


def _states(lab, ends) -> list[str]:
    diags = lab.diags(timeout=10)
    return [diags.portinfo(lid, port).link_state for lid, port in ends]


def _until(read, wanted, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    seen = read()
    while seen != wanted and time.monotonic() < deadline:
        time.sleep(0.2)
        seen = read()
    return seen


def test_powered_off_node_has_its_ports_down_and_active_again_after_boot(lab_fabric, attach_bmc, redfish):
    # given a lab fabric, its inventory and a node with a BMC
    fabric, lab = lab_fabric("power")
    inventory.import_inventory(fabric, actor=SYSTEM_ACTOR)
    node = Node.objects.get(fabric=fabric, name="su01-n03")
    bmc = attach_bmc(node)
    ends = _leaf_ends(fabric, lab, node)
    assert len(ends) == 8 and _states(lab, ends) == ["Active"] * 8
    # when it is powered off and the BMC reports it off
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    assert drive_to_end(node.pk, "off") == "off"
    assert emulator_power(redfish, bmc) == "Off"
    # then every leaf port it was cabled to is down
    assert _until(lambda: _states(lab, ends), ["Down"] * 8) == ["Down"] * 8
    # when it is powered on again, its ports come back Active (OpenSM brings them up)
    services.power_on(node.pk, actor=SYSTEM_ACTOR, reason="needed", enqueue=False)
    assert drive_to_end(node.pk, "on") == "on"
    assert _until(lambda: _states(lab, ends), ["Active"] * 8, seconds=60) == ["Active"] * 8


def test_a_reservation_on_an_off_node_boots_it_through_its_bmc_and_is_ready_with_its_pkey_on_its_ports(
    lab_fabric, attach_bmc, redfish, tenant_a, monkeypatch, django_capture_on_commit_callbacks
):
    drives: list[tuple[int, str]] = []
    reconciles: list[int] = []
    monkeypatch.setattr(services, "_publish", lambda node_id, action: drives.append((node_id, action)))
    monkeypatch.setattr(enqueue, "publish_reconcile", reconciles.append)
    # given a lab fabric whose node su01-n05, alone in a pool, is powered off through its BMC
    fabric, lab = lab_fabric("power-res")
    inventory.import_inventory(fabric, actor=SYSTEM_ACTOR)
    node = Node.objects.get(fabric=fabric, name="su01-n05")
    bmc = attach_bmc(node)
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    assert drive_to_end(node.pk, "off") == "off"
    ends = _leaf_ends(fabric, lab, node)  # the leaves answer while the node is dark
    pool = Pool.objects.create(fabric=fabric, name="one-node")
    pool.nodes.set([node])
    operator = Principal(None, Role.OPERATOR, None)
    quotas.set_quota(SYSTEM_ACTOR, operator, tenant=tenant_a, pool=pool, guaranteed_gpus=8)

    # when the tenant asks for it as soon as possible and the queue pass places it
    request = ReservationRequest(pool_id=pool.pk, nodes=1, duration=dt.timedelta(hours=1), asap=True)
    with django_capture_on_commit_callbacks(execute=True):
        queued = queue.reserve_asap(SYSTEM_ACTOR, Principal(None, Role.TENANT_ADMIN, tenant_a.pk), request)
    with django_capture_on_commit_callbacks(execute=True):
        queue.queue_pass(pool.pk)
    reservation = Reservation.objects.get(pk=queued.pk)
    assert reservation.status == Reservation.Status.PROVISIONING, reservation.reason

    # then the power app was asked to boot the node: powering on, its BMC task enqueued
    node.refresh_from_db()
    assert node.power_state == Node.Power.POWERING_ON and drives == [(node.pk, "on")]
    # when the worker carries the task out: the BMC reports on, scheduling asks for a reconcile
    with django_capture_on_commit_callbacks(execute=True):
        assert drive_to_end(node.pk, "on") == "on"
    assert emulator_power(redfish, bmc) == "On"
    assert fabric.pk in reconciles
    assert _until(lambda: _states(lab, ends), ["Active"] * 8, seconds=60) == ["Active"] * 8
    # and the reconcile's change is applied and verified: ready, the P_Key on the node's 8 HCAs
    change = changes.reconcile(fabric, actor=SYSTEM_ACTOR)
    assert change is not None
    assert apply_change(change.pk, worker_id="test").status == ChangeRequest.Status.APPLIED
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.READY
    diags = lab.diags(timeout=20)
    cas = [n for n in diags.ibnetdiscover().nodes.values() if not n.is_switch]
    guids = {int(g, 16) for g in node.hcas.values_list("port_guid", flat=True)}
    lids = [n.lid for n in cas if n.guid is not None and n.guid + 1 in guids]
    assert len(lids) == 8
    assert {diags.pkeys(lid).membership(reservation.pkey) for lid in lids} == {"full"}


def _hca_pkeys(lab, node: Node, pkey: int) -> set[str | None]:
    """Membership of ``pkey`` on each of the node's HCA ports, read from the ports."""
    diags = lab.diags(timeout=20)
    cas = [n for n in diags.ibnetdiscover().nodes.values() if not n.is_switch]
    guids = {int(g, 16) for g in node.hcas.values_list("port_guid", flat=True)}
    return {diags.pkeys(n.lid).membership(pkey) for n in cas if n.guid is not None and n.guid + 1 in guids}


def test_a_node_powered_off_and_on_gets_its_reservations_pkey_pushed_again_before_it_is_ready(
    lab_fabric, attach_bmc, redfish, tenant_a, monkeypatch, django_capture_on_commit_callbacks
):
    reconciles: list[int] = []
    monkeypatch.setattr(enqueue, "publish_reconcile", reconciles.append)
    # given a reservation on su01-n07 starting in 3 hours, its partition already on the node's HCAs
    fabric, lab = lab_fabric("power-stale")
    inventory.import_inventory(fabric, actor=SYSTEM_ACTOR)
    node = Node.objects.get(fabric=fabric, name="su01-n07")
    attach_bmc(node)
    pool = Pool.objects.create(fabric=fabric, name="one-node")
    pool.nodes.set([node])
    operator = Principal(None, Role.OPERATOR, None)
    quotas.set_quota(SYSTEM_ACTOR, operator, tenant=tenant_a, pool=pool, guaranteed_gpus=8)
    start = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(hours=3)
    request = ReservationRequest(pool_id=pool.pk, nodes=1, start=start, duration=dt.timedelta(hours=1))
    reservation = reservations.reserve(SYSTEM_ACTOR, Principal(None, Role.TENANT_ADMIN, tenant_a.pk), request)
    assert reservation.status == Reservation.Status.PLACED, reservation.reason
    pushed = changes.reconcile(fabric, actor=SYSTEM_ACTOR)
    assert pushed is not None and apply_change(pushed.pk, worker_id="test").status == ChangeRequest.Status.APPLIED
    assert _hca_pkeys(lab, node, reservation.pkey) == {"full"}

    # when the node is powered off (its start is beyond boot time plus margin): its fabric reconciles
    services.power_off(node.pk, actor=SYSTEM_ACTOR, reason="idle", enqueue=False)
    with django_capture_on_commit_callbacks(execute=True):
        assert drive_to_end(node.pk, "off") == "off"
    assert set(reconciles) == {fabric.pk}  # (the power-off and its drive each ask: one fabric)
    # and that reconcile takes the waiting reservation's partition out of the applied state
    removed = changes.reconcile(fabric, actor=SYSTEM_ACTOR)
    assert removed is not None
    assert apply_change(removed.pk, worker_id="test").status == ChangeRequest.Status.APPLIED
    applied = applied_of(fabric)
    assert applied is not None and reservation.pkey not in present_pkeys(applied.desired)

    # when it is on again and the reservation starts
    services.power_on(node.pk, actor=SYSTEM_ACTOR, reason="needed", enqueue=False)
    assert drive_to_end(node.pk, "on") == "on"
    lifecycle.tick(now=start + dt.timedelta(seconds=1))
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.PROVISIONING
    # then the reconcile is a push, not a re-announcement of a stale applied state: not ready yet
    with django_capture_on_commit_callbacks(execute=True):
        push = changes.reconcile(fabric, actor=SYSTEM_ACTOR)
    assert push is not None
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.PROVISIONING
    # and it is ready once the push is verified on the booted node's ports
    assert apply_change(push.pk, worker_id="test").status == ChangeRequest.Status.APPLIED
    reservation.refresh_from_db()
    assert reservation.status == Reservation.Status.READY
    assert _hca_pkeys(lab, node, reservation.pkey) == {"full"}
