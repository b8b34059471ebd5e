"""A reservation's history as a timeline, on its page and in the API: requested → queued (why) →
placed → pushed → verified → ready → released, with times and nobody's name."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.fabric.hooks import notify_verified
from console.fabric.models import ChangeRequest
from scheduling.models import Reservation
from scheduling.services import notices, queue
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


def test_a_fabric_fault_on_the_reservation_is_in_its_history_for_its_tenant_only(
    pool, tenant_a, tenant_b, admin_a, admin_b, client_for, client
):
    give_quota(tenant_a, pool, 64)
    give_quota(tenant_b, pool, 64)
    mine = post(client_for(admin_a), pool, gpus=8, duration_minutes=60).json()
    theirs = post(client_for(admin_b), pool, gpus=8, duration_minutes=60).json()
    fault = {
        "kind": "link_down",
        "severity": "critical",
        "message": "link su01-leaf-r1/3 — su01-n01 HCA-1 down",
        "opened_at": timezone.now().isoformat(),
        "port": "su01-leaf-r1/3",
        "action": "the node is drained (no new placement) until the link is back",
    }
    assert notices.fabric_fault([mine["id"]], fault) == 1
    steps = client_for(admin_a).get(f"/api/reservations/{mine['id']}/timeline/").json()["steps"]
    (step,) = [s for s in steps if s["step"] == "fabric fault"]
    assert step["detail"] == f"{fault['message']} — {fault['action']}"
    other = client_for(admin_b).get(f"/api/reservations/{theirs['id']}/timeline/").json()["steps"]
    assert "fabric fault" not in {s["step"] for s in other}
    client.force_login(admin_a)
    page = client.get(f"/reservations/{mine['id']}/").content.decode()
    assert 'data-step="fabric fault"' in page and "su01-leaf-r1/3" in page
