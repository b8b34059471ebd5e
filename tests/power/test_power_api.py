"""The power and BMC endpoints: operators act, auditors read, tenants are refused; the BMC
password is encrypted at rest and never leaves the console (API bodies, audit rows, a new
address, error reports)."""

from __future__ import annotations

import datetime as dt
import socket

import pytest
from django.db import connection
from django.views.debug import SafeExceptionReporterFilter

from console.power import ipmi_emulator, services
from console.power.drivers import BmcError, driver_for
from console.power.models import Bmc, PowerEvent
from console.tenancy.models import AuditEntry, Tenant
from scheduling.models import Node, Reservation
from scheduling.services.reservations import reserve
from tests.power.conftest import SYSTEM_ACTOR
from tests.scheduling.conftest import give_quota, make_fabric, make_pool, request_for, tenant_principal

pytestmark = pytest.mark.django_db
SECRET = "s3cret-BMC-pass!"
KEPT = "kept-BMC-pass-7"


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


# ---- a BMC's address cannot be used to send its stored password elsewhere: a new address (or
# driver) needs the password again, an address never carries user:password@, and the IPMI
# driver's password (in ipmitool's environment) is starred in Django's error reports


def _body(**extra: object) -> dict:
    body = {"driver": "redfish", "address": "https://bmc-1.example", "username": "admin", "password": KEPT}
    body.update(extra)
    return body


def test_a_new_address_needs_the_password_again(node, operator, client_for):
    client = client_for(operator)
    assert client.put(f"/api/nodes/{node.pk}/bmc/", _body(), format="json").status_code == 200
    # the same address without a password keeps the stored one
    same = {k: v for k, v in _body().items() if k != "password"}
    assert client.put(f"/api/nodes/{node.pk}/bmc/", same, format="json").status_code == 200
    # another address (or driver) without it is refused, and nothing changes
    for moved in ({"address": "https://attacker.example"}, {"driver": "ipmi", "address": "bmc-1.example"}):
        body = {**same, **moved}
        reply = client.put(f"/api/nodes/{node.pk}/bmc/", body, format="json")
        assert reply.status_code == 400 and reply.json()["code"] == "password_required", reply.content
        bmc = Bmc.objects.get(node=node)
        assert (bmc.driver, bmc.address, bmc.password) == ("redfish", "https://bmc-1.example", KEPT)
    # with the password entered again it moves
    moved = _body(address="https://bmc-2.example", password="new-pass")
    assert client.put(f"/api/nodes/{node.pk}/bmc/", moved, format="json").status_code == 200
    bmc = Bmc.objects.get(node=node)
    assert (bmc.address, bmc.password) == ("https://bmc-2.example", "new-pass")


@pytest.mark.parametrize(
    ("driver", "address"),
    [
        ("redfish", "https://admin:pw@bmc-1.example"),
        ("redfish", "https://admin@bmc-1.example:443/"),
        ("ipmi", "admin:pw@bmc-1.example:623"),
        ("redfish", "https://bmc-1.example/?password=pw"),
        ("redfish", "https://bmc-1.example/redfish/v1?user=admin&token=t0k"),
        ("redfish", "https://bmc-1.example/#pw"),
        ("ipmi", "bmc-1.example:623?password=pw"),
    ],
)
def test_an_address_with_credentials_is_refused(node, driver, address):
    with pytest.raises(services.Invalid) as refused:
        services.set_bmc(node.pk, actor=SYSTEM_ACTOR, data=_body(driver=driver, address=address))
    assert refused.value.code == "bmc_address"
    assert not Bmc.objects.filter(node=node).exists()


def test_a_redfish_address_is_a_url(node):
    with pytest.raises(services.Invalid):
        services.set_bmc(node.pk, actor=SYSTEM_ACTOR, data=_body(address="bmc-1.example"))


def test_the_ipmi_password_is_starred_in_error_reports(node):
    # given an IPMI BMC (pyghmi's server) and a node whose stored password it refuses
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    running = ipmi_emulator.start(port, "admin", "the-right-one")
    try:
        data = {"driver": "ipmi", "address": running.address, "username": "admin", "password": KEPT}
        bmc = services.set_bmc(node.pk, actor=SYSTEM_ACTOR, data=data)
        # when the driver's call fails and Django reports the error (as to ADMINS, with locals)
        with pytest.raises(BmcError) as failed:
            driver_for(bmc).status()
    finally:
        running.stop()
    # then the frame holding ipmitool's environment shows it starred, and no frame the password
    reporter = SafeExceptionReporterFilter()
    frames = []
    tb = failed.value.__traceback__
    while tb is not None:  # the driver's frames (not this test's, which holds the password itself)
        if "console/power/" in tb.tb_frame.f_code.co_filename:
            variables = dict(reporter.get_traceback_frame_variables(None, tb.tb_frame))
            frames.append((tb.tb_frame.f_code.co_name, variables))
        tb = tb.tb_next
    run = [variables for name, variables in frames if name == "_run"]
    assert len(run) == 1 and run[0]["env"] == reporter.cleansed_substitute
    assert all(KEPT not in repr(value) for _, variables in frames for value in variables.values())
