"""The signed ``reservation.ready`` event through the whole real pipeline: a reservation made
through the API on a lab fabric (OpenSM on ibsim), the reconcile and the change applied by a real
Celery worker, the P_Key verified on the wire, then the webhook POST received by a real HTTP
server started here, its signature checked independently."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid

import pytest

from console.fabric.lab.fabrics import start_lab, stop_lab
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.services import create_design
from scheduling.models import Reservation
from scheduling.services import quotas
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import whole_lab_pool, with_agent
from tests.notify.conftest import add_webhook

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db(transaction=True)]

ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)
SECRET = "lab-secret-lab-secret"


@pytest.fixture
def lab_pool(tmp_path, tenant_a, lab_console):
    uid = uuid.uuid4().hex[:6]
    options = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
    _, revision = create_design(ACTOR, OPERATOR, name=f"notify-{uid}", options=options)
    fabric, _ = start_lab(revision, name=f"notify-{uid}", actor=ACTOR, workdir=tmp_path / "lab", socket_name=f"n-{uid}")
    try:
        with_agent(fabric, lab_console)
        pool = whole_lab_pool(fabric, ACTOR)
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
        yield pool
    finally:
        fabric.refresh_from_db()
        stop_lab(fabric)


def test_ready_event_arrives_signed_after_the_lab_verified_the_partition(
    lab_pool, worker, receiver, tenant_a, admin_a, client_for
):
    add_webhook(tenant_a, receiver.url, events=["reservation.ready"], secret=SECRET)
    response = client_for(admin_a).post(
        "/api/reservations/", {"pool": lab_pool.pk, "gpus": 16, "duration_minutes": 60}, format="json"
    )
    assert response.status_code == 201, response.content
    reservation_id = response.json()["id"]
    (got,) = receiver.wait_for(1, timeout=180)
    timestamp = got.headers["x-ibconsole-timestamp"]
    expected = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + got.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(got.headers["x-ibconsole-signature"], f"sha256={expected}")
    body = json.loads(got.body)
    assert body["type"] == "reservation.ready" and body["data"]["reservation"]["id"] == reservation_id
    reservation = Reservation.objects.get(pk=reservation_id)
    assert reservation.status == Reservation.Status.READY  # ready only once the wire had its P_Key
    assert sorted(body["data"]["reservation"]["nodes"]) == sorted(
        set(reservation.allocations.values_list("node__name", flat=True))
    )
