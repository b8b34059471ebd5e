"""On two labs (two sites, each its own ibsim + OpenSM): a request near site B lands on B while A
has room, and its P_Key reaches B's ports and none of A's; a request larger than B's free room
waits for B or runs now at A according to its patience, and says why.

Site A: 8 nodes (64 GPUs); site B: 4 nodes (32 GPUs); 2,000 µs between them (tests/sites/conftest).
"""

from __future__ import annotations

import datetime as dt

import pytest

from scheduling.models import Reservation
from scheduling.services import lifecycle, queue, quotas, snapshots
from scheduling.services.reservations import ReservationRequest, reserve
from tests.scheduling.conftest import tenant_principal
from tests.scheduling.test_fabric_lifecycle_lab import holders_of
from tests.sites.conftest import ACTOR, OPERATOR, TwoLabs
from tests.sites.test_spanning_pkey import converge, ports

pytestmark = [pytest.mark.timeout(300)]
S = Reservation.Status


def request(labs: TwoLabs, tenant, **kw) -> ReservationRequest:
    kw.setdefault("duration", dt.timedelta(hours=1))
    return ReservationRequest(pool_id=labs.pool_both.pk, tenant_id=tenant.pk, **kw)


def fabric_names(reservation: Reservation) -> set[str]:
    return set(reservation.allocations.values_list("node__fabric__name", flat=True))


@pytest.fixture
def quota_both(two_labs: TwoLabs, tenant_a, tenant_b) -> TwoLabs:
    snapshots.forget()
    for tenant in (tenant_a, tenant_b):
        quotas.set_quota(
            ACTOR, OPERATOR, tenant=tenant, pool=two_labs.pool_both, guaranteed_gpus=48, borrow_limit_gpus=48
        )
    yield two_labs
    snapshots.forget()


def test_near_site_b_lands_on_b_while_a_has_room_and_only_b_carries_its_pkey(quota_both: TwoLabs, tenant_a):
    labs = quota_both
    a, b = labs.fabrics
    # given an empty pool across both sites (A alone could hold the request: 64 free GPUs)
    made = reserve(ACTOR, tenant_principal(tenant_a), request(labs, tenant_a, gpus=16, near="site-b"))
    # then it is placed on B, and says so
    assert made.status == S.PROVISIONING, made.reason
    assert fabric_names(made) == {b.name} and made.fabric_id == b.pk
    assert made.placement["sites"] == ["site-b"]
    # and once B's fabric converges it is ready, its key on its B ports and on none of A's
    converge(b)
    made.refresh_from_db()
    assert made.status == S.READY
    assert set(holders_of(labs.lab_b, made.pkey, ports(made, b)).values()) == {"full"}
    a_ports = {int(g, 16) for g in a.nodes.values_list("hcas__port_guid", flat=True)[:16]}
    assert set(holders_of(labs.lab_a, made.pkey, a_ports).values()) == {None}
    # cleaned up: released, gone from B's ports
    lifecycle.release(ACTOR, OPERATOR, made)
    converge(b)
    made.refresh_from_db()
    assert made.status == S.RELEASED
    assert set(holders_of(labs.lab_b, made.pkey, ports(made, b)).values()) == {None}


@pytest.mark.parametrize(
    ("patience", "status", "site", "rule", "words"),
    [
        (dt.timedelta(hours=3), S.QUEUED, "site-b", "nearer_later", "within your patience of 3 h"),
        (dt.timedelta(minutes=10), S.PROVISIONING, "site-a", "farther_now", "beyond your patience of 10 min"),
    ],
)
def test_a_request_larger_than_b_waits_for_b_or_runs_at_a_by_its_patience(
    quota_both: TwoLabs, tenant_a, tenant_b, patience, status, site, rule, words
):
    labs = quota_both
    a, b = labs.fabrics
    # given B half full for an hour (2 of its 4 nodes), A empty
    blocker = reserve(ACTOR, tenant_principal(tenant_b), request(labs, tenant_b, nodes=2, near="site-b"))
    assert fabric_names(blocker) == {b.name}
    # when 4 nodes are asked near B
    asked = request(labs, tenant_a, nodes=4, near="site-b", asap=True, max_wait=patience)
    made = queue.reserve_asap(ACTOR, tenant_principal(tenant_a), asked)
    # then patience decides between B later and A now, and the reason says which and why
    assert made.status == status, made.reason
    assert made.explanation["site"]["rule"] == rule and made.explanation["site"]["site"] == site
    assert words in made.reason and "latency 2,000 µs" in made.reason
    if status == S.QUEUED:
        assert made.fabric_id == b.pk and made.estimated_start is not None
        assert abs((made.estimated_start - blocker.end).total_seconds()) <= 60
    else:
        assert fabric_names(made) == {a.name} and made.fabric_id == a.pk
