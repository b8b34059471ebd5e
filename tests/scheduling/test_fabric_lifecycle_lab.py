"""Reservations made real on a lab fabric, without stand-ins between scheduling and the wire.

A 1-SU rail-optimised design (32 DGX H100, 256 HCAs under 8 rail leaves) runs as a lab (OpenSM
on ibsim). Reservations are made through the service, the fabric is reconciled and the change
applied by the real pipeline, and the P_Key tables are read back from the ports with smpquery:
a reservation is ready only with its partition on exactly its nodes' HCAs, a release removes it,
a preemption swaps the borrower's partition for the claimant's, a reservation on powered-off nodes
is ready only once they are on and its P_Key is verified on their ports.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from console.fabric import changes
from console.fabric.changes.pipeline import apply_change
from console.fabric.lab.fabrics import start_lab, stop_lab
from console.fabric.models import ChangeRequest
from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry, Principal, Role
from designer.services import create_design
from scheduling.models import HCA, Node, Reservation
from scheduling.services import lifecycle, power, queue, quotas, snapshots
from scheduling.services.reservations import ReservationRequest, reserve
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import book, converge, whole_lab_pool, with_agent
from tests.scheduling.conftest import report_power

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db]

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)
S = Reservation.Status


@pytest.fixture
def su1(tmp_path, tenant_a, tenant_b, transactional_db, lab_console):
    """The lab of a 1-SU design (its agent connected), its inventory, pool ``su1``; A guaranteed
    128, B 64 + 192."""
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"life-{uid}", options=ONE_SU)
    fabric, lab = start_lab(
        revision,
        name=f"life-{uid}",
        actor=ACTOR,
        workdir=tmp_path / "lab",
        socket_name=f"life-{uid}",
    )
    try:
        with_agent(fabric, lab_console)
        pool = whole_lab_pool(fabric, ACTOR)
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=128)
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_b, pool=pool, guaranteed_gpus=64, borrow_limit_gpus=192)
        yield fabric, lab, pool
    finally:
        fabric.refresh_from_db()
        stop_lab(fabric)


def guids_of(reservation: Reservation) -> set[int]:
    nodes = reservation.allocations.values("node_id")
    return {int(g, 16) for g in HCA.objects.filter(node_id__in=nodes).values_list("port_guid", flat=True)}


def holders_of(lab, pkey: int, guids: set[int]) -> dict[int, str | None]:
    """Membership of ``pkey`` on each HCA port in ``guids``, read from the port's P_Key table."""
    diags = lab.diags(timeout=20)
    # ibsim gives a CA's port 1 the node GUID + 1 (what the lab's inventory records).
    cas = (n for n in diags.ibnetdiscover().nodes.values() if not n.is_switch)
    lid_of = {n.guid + 1: n.lid for n in cas if n.guid is not None}
    return {guid: diags.pkeys(lid_of[guid]).membership(pkey) for guid in sorted(guids)}


def neighbours(reservation: Reservation, count: int = 8) -> set[int]:
    """HCA port GUIDs of nodes the reservation does not hold (same fabric)."""
    held = reservation.allocations.values("node_id")
    others = HCA.objects.filter(node__fabric=reservation.fabric).exclude(node_id__in=held)
    return {int(g, 16) for g in others.order_by("pk").values_list("port_guid", flat=True)[:count]}


def test_ready_only_with_its_partition_on_exactly_its_hcas_and_release_removes_it(su1, tenant_a):
    fabric, lab, pool = su1
    # given a 16-GPU reservation of tenant A, placed and waiting for the fabric
    reservation = book(pool, tenant_a, 16, "train-16")
    members = guids_of(reservation)
    assert len(members) == 16  # 2 nodes × 8 HCAs

    # when fabric operations converge
    change = converge(fabric)

    # then it is ready, and the P_Key is on its 16 HCA ports and on no one else's
    reservation.refresh_from_db()
    assert reservation.status == S.READY and reservation.ready_at is not None
    assert change.status == ChangeRequest.Status.APPLIED
    assert set(holders_of(lab, reservation.pkey, members).values()) == {"full"}
    assert set(holders_of(lab, reservation.pkey, neighbours(reservation)).values()) == {None}

    # when it is released early: ending until the fabric shows the partition gone
    lifecycle.release(ACTOR, OPERATOR, reservation)
    reservation.refresh_from_db()
    assert reservation.status == S.ENDING and reservation.pkey_live
    converge(fabric)
    reservation.refresh_from_db()
    assert reservation.status == S.RELEASED and not reservation.pkey_live
    assert set(holders_of(lab, reservation.pkey, members).values()) == {None}


def test_preemption_swaps_the_borrowers_partition_for_the_claimants(su1, tenant_a, tenant_b):
    fabric, lab, pool = su1
    # given tenant B borrowed the whole pool and its partition is on the fabric
    borrower = book(pool, tenant_b, 256, "borrow-all")
    assert borrower.borrowed
    converge(fabric)
    borrower.refresh_from_db()
    assert borrower.status == S.READY

    # when tenant A claims 16 GPUs of its guarantee
    claimant = book(pool, tenant_a, 16, "claim-16")

    # then B is preempted with notice, and one change swaps the partitions on the wire
    borrower.refresh_from_db()
    assert borrower.status == S.PREEMPTED and "borrowed capacity reclaimed" in borrower.reason
    converge(fabric)
    borrower.refresh_from_db()
    claimant.refresh_from_db()
    assert claimant.status == S.READY and not borrower.pkey_live
    claimed = guids_of(claimant)
    assert set(holders_of(lab, claimant.pkey, claimed).values()) == {"full"}
    assert set(holders_of(lab, borrower.pkey, claimed | neighbours(claimant, 4)).values()) == {None}
    assert claimant.pkey != borrower.pkey  # a key is not reused while it was live


def test_a_reservation_on_powered_off_nodes_is_ready_only_after_they_boot_and_its_pkey_is_on_their_ports(
    su1, tenant_a, django_capture_on_commit_callbacks
):
    fabric, lab, pool = su1
    # given every node of the pool powered off, an asap request of 16 GPUs is queued, then the
    # queue pass places it on off nodes: provisioning, powering on
    Node.objects.filter(pools=pool).update(power_state=Node.Power.OFF)
    snapshots.forget()
    request = ReservationRequest(pool_id=pool.pk, gpus=16, duration=dt.timedelta(hours=2), tenant_id=tenant_a.pk)
    assert queue.reserve_asap(ACTOR, OPERATOR, request).status == S.QUEUED
    with django_capture_on_commit_callbacks(execute=True):
        queue.queue_pass(pool.pk)
    reservation = Reservation.objects.get(tenant=tenant_a)
    assert reservation.status == S.PROVISIONING
    assert power.progress([reservation])[reservation.pk]["step"] == "powering-on"
    members = guids_of(reservation)

    # when the fabric converges while its nodes are off: its partition is not pushed, not ready
    change = changes.reconcile(fabric, actor=ACTOR)
    if change is not None:
        apply_change(change.pk, worker_id="test")
    reservation.refresh_from_db()
    assert reservation.status == S.PROVISIONING
    assert set(holders_of(lab, reservation.pkey, members).values()) == {None}

    # when the BMC reports its nodes booting, then on
    node_ids = sorted(set(reservation.allocations.values_list("node_id", flat=True)))
    for node_id in node_ids:
        report_power(node_id, Node.Power.POWERING_ON)
    for node_id in node_ids:
        report_power(node_id, Node.Power.ON)
    assert power.progress([reservation])[reservation.pk]["step"] == "fabric"

    # then the pipeline pushes and verifies its P_Key: ready, on exactly its HCA ports
    converge(fabric)
    reservation.refresh_from_db()
    assert reservation.status == S.READY
    assert set(holders_of(lab, reservation.pkey, members).values()) == {"full"}
    assert set(holders_of(lab, reservation.pkey, neighbours(reservation)).values()) == {None}


def pushed_ahead(su1, tenant) -> tuple[Reservation, dt.datetime, ChangeRequest]:
    """A reservation of 16 GPUs starting in 30 minutes, placed, its partition pushed and verified
    ahead of its start; with its start and the change that pushed it."""
    fabric, lab, pool = su1
    start = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(minutes=30)
    request = ReservationRequest(
        pool_id=pool.pk, gpus=16, start=start, duration=dt.timedelta(hours=1), name="later", tenant_id=tenant.pk
    )
    reservation = reserve(ACTOR, OPERATOR, request)
    assert reservation.status == S.PLACED, reservation.reason
    pushed = converge(fabric)
    reservation.refresh_from_db()
    assert reservation.status == S.PLACED
    assert set(holders_of(lab, reservation.pkey, guids_of(reservation)).values()) == {"full"}
    return reservation, start, pushed


def test_a_future_reservation_pushed_before_its_start_is_ready_at_its_start_without_a_new_change(
    su1, tenant_a, django_capture_on_commit_callbacks
):
    fabric, lab, pool = su1
    # given a reservation starting in 30 minutes: placed, and its partition pushed ahead of time
    reservation, start, _ = pushed_ahead(su1, tenant_a)

    # when its start comes: the tick starts it, and the reconcile finds nothing to change
    lifecycle.tick(now=start + dt.timedelta(seconds=1))
    reservation.refresh_from_db()
    assert reservation.status == S.PROVISIONING
    changes_before = ChangeRequest.objects.filter(fabric=fabric).count()
    with django_capture_on_commit_callbacks(execute=True):
        assert changes.reconcile(fabric, actor=ACTOR) is None

    # then it is ready on the strength of the verified change that put its P_Key on the ports
    reservation.refresh_from_db()
    assert reservation.status == S.READY and reservation.ready_at is not None
    assert ChangeRequest.objects.filter(fabric=fabric).count() == changes_before
    assert set(holders_of(lab, reservation.pkey, guids_of(reservation)).values()) == {"full"}


def test_a_cancelled_reservation_keeps_its_pkey_while_an_open_change_still_pushes_it(
    su1, tenant_a, django_capture_on_commit_callbacks
):
    fabric, lab, pool = su1
    # given a fabric whose applied state carries one reservation, and a second one granted whose
    # change is created but not yet applied
    converge_first = book(pool, tenant_a, 8, "first")
    converge(fabric)
    later = book(pool, tenant_a, 8, "second")
    pending = changes.reconcile(fabric, actor=ACTOR)
    assert pending is not None and pending.status in (
        ChangeRequest.Status.QUEUED,
        ChangeRequest.Status.PENDING_APPROVAL,
    )
    # when the second is cancelled: the desired state equals the applied one again
    lifecycle.cancel(ACTOR, OPERATOR, later)
    with django_capture_on_commit_callbacks(execute=True):
        assert changes.reconcile(fabric, actor=ACTOR) is None
    # then its P_Key is still held (the open change will put it on the wire), so it is not handed out
    later.refresh_from_db()
    assert later.pkey_live and later.status == S.CANCELLED
    # and once that change is applied and a later one removes the partition, it is released
    assert apply_change(pending.pk, worker_id="test").status == ChangeRequest.Status.APPLIED
    converge(fabric)
    later.refresh_from_db()
    assert not later.pkey_live and set(holders_of(lab, later.pkey, guids_of(later)).values()) == {None}
    converge_first.refresh_from_db()
    assert converge_first.status == S.READY


def test_after_a_lab_restart_a_reservation_is_ready_only_once_its_pkey_is_pushed_again(
    su1, tenant_a, django_capture_on_commit_callbacks, lab_console
):
    fabric, lab, pool = su1
    # given a reservation starting in 30 minutes whose partition was pushed and verified ahead
    reservation, start, pushed = pushed_ahead(su1, tenant_a)
    # and the lab restarted since: OpenSM starts from the design's files, the ports' tables anew
    workdir, socket = fabric.config["workdir"], fabric.config["ibsim_sockname"]
    stop_lab(fabric)
    fabric, lab = start_lab(fabric.revision, name=fabric.name, actor=ACTOR, workdir=workdir, socket_name=socket)
    with_agent(fabric, lab_console)  # (the lab's stop stopped its agent)
    assert set(holders_of(lab, reservation.pkey, guids_of(reservation)).values()) == {None}

    # when its start comes and the reconcile finds the desired state equal to the stored applied one
    lifecycle.tick(now=start + dt.timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        change = changes.reconcile(fabric, actor=ACTOR)

    # then it is not ready on the strength of the stale applied state: a change pushes it again
    reservation.refresh_from_db()
    assert reservation.status == S.PROVISIONING
    assert change is not None and change.pk != pushed.pk
    assert AuditEntry.objects.filter(action="fabric.applied.stale", object_id=str(fabric.pk)).count() == 1
    assert apply_change(change.pk, worker_id="test").status == ChangeRequest.Status.APPLIED
    reservation.refresh_from_db()
    assert reservation.status == S.READY
    assert set(holders_of(lab, reservation.pkey, guids_of(reservation)).values()) == {"full"}
