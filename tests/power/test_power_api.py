"""The power and BMC endpoints: operators act, auditors read, tenants are refused; the BMC
password is encrypted at rest and never leaves the console (API bodies, audit rows)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection

from console.power.models import Bmc, PowerEvent
from console.tenancy.models import AuditEntry, Tenant
from scheduling.models import Node, Reservation
from scheduling.services.reservations import reserve
from tests.power.conftest import SYSTEM_ACTOR
from tests.scheduling.conftest import give_quota, make_fabric, make_pool, request_for, tenant_principal

pytestmark = pytest.mark.django_db
SECRET = "s3cret-BMC-pass!"


@pytest.fixture
def node(db) -> Node:
    fabric = make_fabric("api", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    return Node.objects.filter(fabric=fabric).order_by("pk").first()


def _put_bmc(client, node, redfish, **extra):
    body = {
        "driver": "redfish",
        "address": redfish.url,
        "username": redfish.username,
        "password": SECRET,
        "system_id": redfish.systems["sys-40"],
        "verify_tls": False,
    }
    body.update(extra)
    return client.put(f"/api/nodes/{node.pk}/bmc/", body, format="json")


def test_bmc_password_is_encrypted_at_rest_and_never_returned(node, operator, client_for, redfish):
    client = client_for(operator)
    # when an operator sets the node's BMC
    reply = _put_bmc(client, node, redfish)
    assert reply.status_code == 200, reply.content
    # then the stored column is not the password (read raw, past the model)
    with connection.cursor() as cursor:
        cursor.execute("SELECT password_encrypted FROM power_bmc WHERE node_id = %s", [node.pk])
        (raw,) = cursor.fetchone()
    assert raw and SECRET not in raw and raw.startswith("gAAAAA")  # a Fernet token
    assert Bmc.objects.get(node=node).password == SECRET
    # and no answer or audit row carries it
    answers = [reply, client.get(f"/api/nodes/{node.pk}/bmc/"), client.get(f"/api/nodes/{node.pk}/power/")]
    for answer in answers:
        assert answer.status_code == 200
        assert SECRET not in answer.content.decode() and "password_encrypted" not in answer.content.decode()
    assert answers[1].json()["has_password"] is True
    entry = AuditEntry.objects.get(action="node.bmc_set")
    assert SECRET not in str(entry.after) and raw not in str(entry.after)
    # a PUT without a password keeps the stored one
    assert _put_bmc(client, node, redfish, password=None).status_code == 400  # null is not "absent"
    body = {"driver": "redfish", "address": redfish.url, "system_id": redfish.systems["sys-40"]}
    assert client.put(f"/api/nodes/{node.pk}/bmc/", body, format="json").status_code == 200
    assert Bmc.objects.get(node=node).password == SECRET


def test_power_action_through_the_api(node, operator, client_for, redfish):
    client = client_for(operator)
    _put_bmc(client, node, redfish)
    reply = client.post(f"/api/nodes/{node.pk}/power/", {"action": "off", "reason": "idle"}, format="json")
    assert reply.status_code == 202, reply.content
    assert reply.json()["power_state"] == "powering-off"
    assert reply.json()["history"][0]["to_state"] == "powering-off"
    node.refresh_from_db()
    assert node.power_state == "powering-off"
    assert AuditEntry.objects.filter(action="node.power_off", actor_user_id=operator.pk).exists()
    # a second off while it is going off is a conflict
    again = client.post(f"/api/nodes/{node.pk}/power/", {"action": "force-off"}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "power_state"


def test_power_off_of_a_needed_node_is_409(node, operator, client_for, redfish):
    client = client_for(operator)
    _put_bmc(client, node, redfish)
    tenant = Tenant.objects.create(name="T", slug="t")
    pool = make_pool(node.fabric, "one", nodes=[node])
    give_quota(tenant, pool, 8)
    start = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)
    reservation = reserve(SYSTEM_ACTOR, tenant_principal(tenant), request_for(pool, gpus=8, start=start))
    assert reservation.status in Reservation.HOLDING
    reply = client.post(f"/api/nodes/{node.pk}/power/", {"action": "off"}, format="json")
    assert reply.status_code == 409
    body = reply.json()
    assert body["code"] == "node_needed" and body["fields"]["reservations"] == [reservation.pk]
    assert "needed by reservation" in body["detail"]
    assert not PowerEvent.objects.filter(node=node).exists()


def test_roles(node, operator, auditor, admin_a, client_for, redfish):
    _put_bmc(client_for(operator), node, redfish)
    tenant, aud = client_for(admin_a), client_for(auditor)
    # tenants neither read nor act
    assert tenant.get(f"/api/nodes/{node.pk}/power/").status_code == 403
    assert tenant.get(f"/api/nodes/{node.pk}/bmc/").status_code == 403
    assert tenant.post(f"/api/nodes/{node.pk}/power/", {"action": "off"}, format="json").status_code == 403
    assert _put_bmc(tenant, node, redfish).status_code == 403
    # auditors read, never act
    assert aud.get(f"/api/nodes/{node.pk}/power/").status_code == 200
    assert aud.post(f"/api/nodes/{node.pk}/power/", {"action": "off"}, format="json").status_code == 403
    assert _put_bmc(aud, node, redfish).status_code == 403
    node.refresh_from_db()
    assert node.power_state == "on"
    # an unknown node is 404; a bad action 400
    assert client_for(operator).get("/api/nodes/999999/power/").status_code == 404
    bad = client_for(operator).post(f"/api/nodes/{node.pk}/power/", {"action": "reboot"}, format="json")
    assert bad.status_code == 400
