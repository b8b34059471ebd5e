"""A reservation's history as a timeline, on its page and in the API: requested → queued (why) →
placed → pushed → verified → ready → released, with times and nobody's name."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.fabric.hooks import notify_verified
from console.fabric.models import ChangeRequest
from scheduling.models import Reservation
from scheduling.services import queue
from tests.scheduling.conftest import give_quota

pytestmark = pytest.mark.django_db


def post(client, pool, **body):
    return client.post("/api/reservations/", {"pool": pool.pk, **body}, format="json")


def test_a_queued_reservation_placed_pushed_verified_ready_and_released(
    pool, tenant_a, tenant_b, admin_a, admin_b, client_for, operator, client
):
    give_quota(tenant_a, pool, 128)
    give_quota(tenant_b, pool, 0, borrow=128)
    a, b = client_for(admin_a), client_for(admin_b)
    full = post(a, pool, gpus=128, duration_minutes=120).json()
    waiting = post(b, pool, gpus=32, start="asap", duration_minutes=60).json()
    steps = b.get(f"/api/reservations/{waiting['id']}/timeline/").json()["steps"]
    assert [s["step"] for s in steps] == ["requested", "queued"]
    assert steps[1]["detail"].startswith("no room for 32 GPUs now")  # why it waits, current
    # the blocker goes, the queue places it; its partition's change runs and is verified
    a.post(f"/api/reservations/{full['id']}/release/")
    queue.queue_pass(pool.pk)
    row = Reservation.objects.get(pk=waiting["id"])
    started = timezone.now()  # pushed, then verified on the ports
    change = ChangeRequest.objects.create(
        fabric=row.fabric,
        status=ChangeRequest.Status.APPLIED,
        desired={"partitions": [{"name": row.partition_name}]},
        started_at=started,
        finished_at=started + dt.timedelta(microseconds=1),  # before the hook below marks it ready
    )
    notify_verified(row.fabric_id, present_pkeys={row.pkey}, change_id=change.pk)
    b.post(f"/api/reservations/{waiting['id']}/release/")
    body = b.get(f"/api/reservations/{waiting['id']}/timeline/").json()
    names = [s["step"] for s in body["steps"]]
    assert names[:2] == ["requested", "queued"] and "placed" in names and names.index("placed") > 1
    assert (
        names.index("pushed") < names.index("verified")
        and "ready" in names
        and names[-1] in ("release asked", "released")
    )
    assert body["steps"][1]["detail"] == ""  # it waits no more: its reason is gone
    times = [s["at"] for s in body["steps"]]
    assert times == sorted(times)
    # nobody's name in it, and another tenant gets 404
    text = str(body)
    assert "admin-b" not in text and "op" not in {s["detail"] for s in body["steps"]}
    assert a.get(f"/api/reservations/{waiting['id']}/timeline/").status_code == 404
    # the page shows the same steps, to the tenant and to operators
    for user in (admin_b, operator):
        client.force_login(user)
        page = client.get(f"/reservations/{waiting['id']}/").content.decode()
        assert page.count('data-testid="timeline-step"') == len(names)
        assert 'data-step="pushed"' in page and 'data-step="verified"' in page
