"""Virtual-GUID writes are coalesced and rate-limited (issue 33, item 5): each write through
``/ufmRest/`` made a fabric change of its own, without limit. A burst folds into the change that
waits for a worker (one push), and a tenant's writes past ``CONSOLE_THROTTLE_RATES["vguid"]``
answer 429 with ``Retry-After`` in UFM's error shape. No worker runs here: the changes stay
queued, which is the moment a burst folds into one."""

from __future__ import annotations

import datetime as dt

import pytest
from django.core.cache import caches

from console.fabric import changes
from console.fabric.models import ChangeRequest
from console.fabric.services import vguid_range
from console.tenancy.models import AuditEntry, Principal, Role
from scheduling.models import Reservation
from scheduling.services import quotas
from scheduling.services.reservations import ReservationRequest, reserve
from scheduling.services.virtual_guids import TooManyWrites, change_virtual_guids
from tests.fabric.lab_fixtures import ACTOR, su1_revision, whole_lab_pool  # noqa: F401  (fixture)
from tests.ufm.test_ufm_api import basic, fast_password_hashing  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
OPERATOR = Principal(None, Role.OPERATOR, None)


@pytest.fixture(autouse=True)
def rates(settings):
    settings.CONSOLE_THROTTLE_RATES = {"anon": "", "session": "", "token": "", "plan": "", "vguid": ""}
    settings.UFM_API_WAIT_S = 0.3  # no worker pushes here: a write's call gives up waiting at once
    caches["throttle"].clear()
    yield settings
    caches["throttle"].clear()


@pytest.fixture
def reservation(su1_revision, tenant_a, member_a) -> Reservation:  # noqa: F811
    fabric = changes.create_fabric(ACTOR, OPERATOR, name="vguid-f", revision=su1_revision)
    pool = whole_lab_pool(fabric)
    quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    request = ReservationRequest(pool_id=pool.pk, gpus=16, duration=dt.timedelta(hours=1), tenant_id=tenant_a.pk)
    res = reserve(ACTOR, Principal(member_a.pk, Role.TENANT_MEMBER, tenant_a.pk), request)
    assert res.status in Reservation.HOLDING
    return res


def vf(reservation: Reservation, n: int) -> int:
    return vguid_range(reservation.pk).first + n


def test_a_burst_of_writes_folds_into_the_change_that_waits(reservation, member_a):
    fabric = reservation.fabric
    tenant = Principal(member_a.pk, Role.TENANT_MEMBER, reservation.tenant_id)
    first = changes.reconcile(fabric, actor=ACTOR)  # the reservation's partition: queued
    assert first is not None and first.status == ChangeRequest.Status.QUEUED
    for n in range(5):
        assert change_virtual_guids(ACTOR, tenant, reservation.pk, add={vf(reservation, n): "full"})
        assert changes.reconcile(fabric, actor=ACTOR).pk == first.pk  # folded, no new change
    assert ChangeRequest.objects.filter(fabric=fabric).count() == 1
    first.refresh_from_db()
    text = first.artefacts["partitions.conf"]
    assert all(f"{vf(reservation, n):#018x}=full" in text for n in range(5))
    assert AuditEntry.objects.filter(action="fabric.change.coalesce", object_id=str(first.pk)).count() == 5
    # once a worker has taken it, the next write is a change of its own (nothing folds into a push)
    ChangeRequest.objects.filter(pk=first.pk).update(status=ChangeRequest.Status.APPLYING, lease_owner="w", attempts=1)
    change_virtual_guids(ACTOR, tenant, reservation.pk, add={vf(reservation, 9): "full"})
    second = changes.reconcile(fabric, actor=ACTOR)
    assert second is not None and second.pk != first.pk
    assert ChangeRequest.objects.filter(fabric=fabric).count() == 2


def test_a_tenants_writes_past_its_rate_answer_429_with_retry_after(reservation, member_a, rates):
    rates.CONSOLE_THROTTLE_RATES = {**rates.CONSOLE_THROTTLE_RATES, "vguid": "3/minute"}
    key, a = f"{reservation.pkey:#x}", basic("member-a")
    answers = []
    for n in range(4):
        r = a.post("/ufmRest/resources/pkeys", {"pkey": key, "guids": [f"{vf(reservation, n):016x}"]}, format="json")
        answers.append(r)
    assert [r.status_code for r in answers[:3]] == [504] * 3  # written; no worker to verify them here
    refused = answers[3]
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert set(refused.json()) == {"error"} and "too many virtual GUID changes" in refused.json()["error"]
    reservation.refresh_from_db()
    assert len(reservation.virtual_guids) == 3  # the refused write changed nothing
    # a repeat of a write already made changes nothing and is not counted
    tenant = Principal(member_a.pk, Role.TENANT_MEMBER, reservation.tenant_id)
    assert change_virtual_guids(ACTOR, tenant, reservation.pk, add={vf(reservation, 0): "full"}) is False
    with pytest.raises(TooManyWrites) as info:
        change_virtual_guids(ACTOR, tenant, reservation.pk, add={vf(reservation, 7): "full"})
    assert info.value.status == 429 and info.value.retry_after >= 1
