"""The power policy endpoints: operators write and run, auditors read, tenants are refused (403),
unknown pools and nodes are 404, bad values are clear 400s, and every write is audited."""

from __future__ import annotations

import pytest

from console.power.models import PolicyRun, PoolPowerPolicy, PowerPin
from console.tenancy.models import AuditEntry
from scheduling.models import Node
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(db):
    fabric = make_fabric("papi", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    return make_pool(fabric, "papi")


def test_the_defaults_are_a_disabled_policy(pool, operator, client_for):
    body = client_for(operator).get(f"/api/pools/{pool.pk}/power-policy/").json()
    assert body["enabled"] is False and body["dry_run"] is False
    assert (body["idle_after_s"], body["margin_s"], body["buffer_nodes"], body["max_actions_per_minute"]) == (
        1800,
        300,
        0,
        0,
    )
    assert body["pins"] == [] and not PoolPowerPolicy.objects.exists()


def test_an_operator_sets_runs_and_reads_the_policy(pool, operator, client_for, attach_bmc):
    client = client_for(operator)
    node = Node.objects.filter(pools=pool).order_by("name").first()
    attach_bmc(node)
    # set: enabled as a dry run, a short idle time
    reply = client.put(
        f"/api/pools/{pool.pk}/power-policy/",
        {"enabled": True, "dry_run": True, "idle_after_s": 0, "buffer_percent": 0},
        format="json",
    )
    assert reply.status_code == 200, reply.content
    assert (
        reply.json()["enabled"] and reply.json()["enabled_at"] and reply.json()["updated_by"].startswith("op (token ")
    )
    entry = AuditEntry.objects.get(action="pool.power_policy")
    assert entry.actor_user_id == operator.pk and entry.after["idle_after"] == 0
    # an absent field is kept
    client.put(f"/api/pools/{pool.pk}/power-policy/", {"buffer_nodes": 1}, format="json")
    stored = PoolPowerPolicy.objects.get(pool=pool)
    assert stored.dry_run and stored.buffer_nodes == 1 and stored.idle_after.total_seconds() == 0
    # run now: the stored dry run; the one node with a BMC would go off (the other cannot be switched)
    run = client.post(f"/api/pools/{pool.pk}/power-policy/run/", {}, format="json")
    assert run.status_code == 201, run.content
    assert run.json()["dry_run"] is True and run.json()["trigger"] == "operator"
    assert [(a["node"], a["action"], a["outcome"]) for a in run.json()["actions"]] == [(node.name, "off", "would")]
    assert "UTC" in run.json()["actions"][0]["reason"]
    assert AuditEntry.objects.filter(action="pool.power_policy_run", actor_user_id=operator.pk).exists()
    assert Node.objects.get(pk=node.pk).power_state == "on"
    runs = client.get(f"/api/pools/{pool.pk}/power-policy/runs/")
    assert runs.status_code == 200 and [r["id"] for r in runs.json()] == [run.json()["id"]]


def test_pins_through_the_api(pool, operator, client_for):
    client = client_for(operator)
    node = Node.objects.filter(pools=pool).order_by("name").first()
    reply = client.put(f"/api/nodes/{node.pk}/power/pin/", {"reason": "burn-in"}, format="json")
    assert reply.status_code == 200, reply.content
    assert reply.json()["name"] == node.name and reply.json()["pinned_by"].startswith("op (token ")
    pins = client.get(f"/api/pools/{pool.pk}/power-policy/").json()["pins"]
    assert [(p["node"], p["reason"]) for p in pins] == [(node.pk, "burn-in")]
    assert AuditEntry.objects.filter(action="node.power_pin", object_id=str(node.pk)).exists()
    assert client.delete(f"/api/nodes/{node.pk}/power/pin/").status_code == 204
    assert not PowerPin.objects.exists()
    assert AuditEntry.objects.filter(action="node.power_unpin").exists()
    assert client.delete(f"/api/nodes/{node.pk}/power/pin/").status_code == 404


def test_bad_values_are_400_with_the_field(pool, operator, client_for):
    client = client_for(operator)
    url = f"/api/pools/{pool.pk}/power-policy/"
    for body, field in (
        ({"buffer_percent": 101}, "buffer_percent"),
        ({"idle_after_s": -1}, "idle_after_s"),
        ({"max_actions_per_minute": "many"}, "max_actions_per_minute"),
        ({"enabled": "perhaps"}, "enabled"),
    ):
        reply = client.put(url, body, format="json")
        assert reply.status_code == 400, body
        assert field in reply.content.decode(), reply.content
    assert client.post(f"/api/pools/{pool.pk}/power-policy/run/", {"dry_run": "x"}, format="json").status_code == 400
    assert not PoolPowerPolicy.objects.exists() and not PolicyRun.objects.exists()


def test_roles(pool, operator, auditor, admin_a, member_a, client_for):
    node = Node.objects.filter(pools=pool).first()
    urls = [
        f"/api/pools/{pool.pk}/power-policy/",
        f"/api/pools/{pool.pk}/power-policy/runs/",
    ]
    aud = client_for(auditor)
    for url in urls:
        assert aud.get(url).status_code == 200, url
    for client in (client_for(admin_a), client_for(member_a)):
        for url in urls:
            assert client.get(url).status_code == 403, url
    for client in (aud, client_for(admin_a), client_for(member_a)):
        assert client.put(urls[0], {"enabled": True}, format="json").status_code == 403
        assert client.post(f"{urls[0]}run/", {"dry_run": True}, format="json").status_code == 403
        assert client.put(f"/api/nodes/{node.pk}/power/pin/", {}, format="json").status_code == 403
        assert client.delete(f"/api/nodes/{node.pk}/power/pin/").status_code == 403
    assert not PoolPowerPolicy.objects.exists() and not PolicyRun.objects.exists() and not PowerPin.objects.exists()
    op = client_for(operator)
    assert op.get("/api/pools/999999/power-policy/").status_code == 404
    assert op.post("/api/pools/999999/power-policy/run/", {}, format="json").status_code == 404
    assert op.put("/api/nodes/999999/power/pin/", {}, format="json").status_code == 404
