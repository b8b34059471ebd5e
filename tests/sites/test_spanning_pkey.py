"""A reservation spanning two sites has its P_Key pushed and verified on both subnets, each
through its own lab (OpenSM on ibsim), and removed from both on release.

What is on the wire is read back from the ports of each lab with its own diag runner
(``smpquery pkeys``), independently of the push's own verification.
"""

from __future__ import annotations

import datetime as dt

import pytest

from console.fabric import changes
from console.fabric.changes.pipeline import apply_change
from console.fabric.models import ChangeRequest
from scheduling.models import HCA, Reservation, ReservationSubnet
from scheduling.services import lifecycle, quotas, snapshots
from scheduling.services.reservations import ReservationRequest, reserve
from tests.scheduling.test_fabric_lifecycle_lab import holders_of
from tests.sites.conftest import ACTOR, OPERATOR, TwoLabs

pytestmark = [pytest.mark.timeout(300)]
S = Reservation.Status


def converge(fabric) -> ChangeRequest:
    """What ``fabric.reconcile`` does on the fabric's site worker: one change, applied and verified."""
    change = changes.reconcile(fabric, actor=ACTOR)
    assert change is not None, f"no change for {fabric}"
    applied = apply_change(change.pk, worker_id="test")
    assert applied is not None and applied.status == ChangeRequest.Status.APPLIED, applied and (
        applied.error,
        applied.outcome,
    )
    return applied


def ports(reservation: Reservation, fabric, *, held: bool = True) -> set[int]:
    """HCA port GUIDs on ``fabric`` of the reservation's nodes (``held``), or of eight others."""
    nodes = reservation.allocations.values("node_id")
    rows = HCA.objects.filter(node__fabric=fabric)
    rows = rows.filter(node_id__in=nodes) if held else rows.exclude(node_id__in=nodes).order_by("pk")[:8]
    return {int(g, 16) for g in rows.values_list("port_guid", flat=True)}


def live(reservation: Reservation) -> dict[int, bool]:
    return dict(ReservationSubnet.objects.filter(reservation=reservation).values_list("fabric_id", "pkey_live"))


def test_a_spanning_reservation_is_verified_on_both_subnets_and_removed_from_both(two_labs: TwoLabs, tenant_a):
    snapshots.forget()
    a, b = two_labs.fabrics
    lab_a, lab_b = two_labs.labs
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=two_labs.pool_both, guaranteed_gpus=96)
    # given a gang larger than site A (64 GPUs) in the pool spanning both sites
    request = ReservationRequest(
        pool_id=two_labs.pool_both.pk, gpus=72, duration=dt.timedelta(hours=2), tenant_id=tenant_a.pk, span_sites=True
    )
    made = reserve(ACTOR, OPERATOR, request)
    assert made.status == S.PROVISIONING, made.reason
    on_a, on_b = ports(made, a), ports(made, b)
    assert len(on_a) + len(on_b) == 72 and on_a and on_b  # one HCA port per GPU, on both subnets
    assert live(made) == {a.pk: True, b.pk: True}
    pkey = made.pkey

    # when site A's fabric converges: the P_Key is on A's member ports, but B has not verified it
    converge(a)
    made.refresh_from_db()
    assert made.status == S.PROVISIONING
    assert set(holders_of(lab_a, pkey, on_a).values()) == {"full"}
    assert set(holders_of(lab_b, pkey, on_b).values()) == {None}

    # when site B's converges too: ready, and each subnet carries the key on exactly its members
    converge(b)
    made.refresh_from_db()
    assert made.status == S.READY
    outsiders = 0
    for lab, fabric, members in ((lab_a, a, on_a), (lab_b, b, on_b)):
        assert set(holders_of(lab, pkey, members).values()) == {"full"}
        others = holders_of(lab, pkey, ports(made, fabric, held=False))
        assert set(others.values()) <= {None}
        outsiders += len(others)
    assert outsiders >= 8  # 3 of the 12 nodes are not its own: their ports were read too

    # when it is released: gone from A first (still ending: B holds it), then from B (released)
    lifecycle.release(ACTOR, OPERATOR, made)
    converge(a)
    made.refresh_from_db()
    assert made.status == S.ENDING and live(made) == {a.pk: False, b.pk: True}
    assert set(holders_of(lab_a, pkey, on_a).values()) == {None}
    assert set(holders_of(lab_b, pkey, on_b).values()) == {"full"}
    converge(b)
    made.refresh_from_db()
    assert made.status == S.RELEASED and not made.pkey_live and live(made) == {a.pk: False, b.pk: False}
    assert set(holders_of(lab_b, pkey, on_b).values()) == {None}
    snapshots.forget()
