"""The power policy editor page: operators edit, run and pin (through the audited services),
auditors read it without any form, tenants never see it (404)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client

from console.power.models import PolicyRun, PoolPowerPolicy, PowerPin
from console.tenancy.models import AuditEntry
from scheduling.models import Node
from tests.scheduling.conftest import make_fabric, make_pool

pytestmark = pytest.mark.django_db


@pytest.fixture
def pool(db):
    fabric = make_fabric("ppage", {"topology": "fat-tree", "nodes": 2, "node_type": "DGX-H100"})
    return make_pool(fabric, "ppage")


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _policy_form(**over):
    form = {
        "form": "policy",
        "enabled": "on",
        "idle_after_min": "45",
        "buffer_nodes": "1",
        "buffer_percent": "10",
        "margin_min": "7",
        "max_actions_per_minute": "4",
    }
    form.update(over)
    return form


def test_an_operator_edits_the_policy_runs_it_and_pins_a_node(pool, operator):
    client = _client(operator)
    url = f"/reservations/power/{pool.pk}/"
    page = client.get(url).content.decode()
    assert "Power off after idle (minutes)" in page and "A node unused this long may be powered off." in page
    assert client.get("/reservations/power/").status_code == 200
    # save
    reply = client.post(url, _policy_form())
    assert reply.status_code == 302
    stored = PoolPowerPolicy.objects.get(pool=pool)
    assert (stored.enabled, stored.dry_run, stored.idle_after, stored.margin) == (
        True,
        False,
        dt.timedelta(minutes=45),
        dt.timedelta(minutes=7),
    )
    assert (stored.buffer_nodes, stored.buffer_percent, stored.max_actions_per_minute) == (1, 10.0, 4)
    assert AuditEntry.objects.filter(action="pool.power_policy", actor_user_id=operator.pk).exists()
    # a bad value is refused and nothing changes
    client.post(url, _policy_form(buffer_percent="150"))
    assert PoolPowerPolicy.objects.get(pool=pool).buffer_percent == 10.0
    # a dry run appears in the runs' table with its sentence
    client.post(url, {"form": "dry-run"})
    run = PolicyRun.objects.get(pool=pool)
    assert run.dry_run
    page = client.get(url).content.decode()
    assert "dry run" in page and " UTC</td>" in page
    # pin and unpin
    node = Node.objects.filter(pools=pool).order_by("name").first()
    client.post(url, {"form": "pin", "node": node.pk, "reason": "burn-in test"})
    assert PowerPin.objects.get(node=node).reason == "burn-in test"
    assert "burn-in test" in client.get(url).content.decode()
    client.post(url, {"form": "unpin", "node": node.pk})
    assert not PowerPin.objects.exists()


def test_a_dry_run_report_names_the_node_and_why(pool, operator, attach_bmc):
    node = Node.objects.filter(pools=pool).order_by("name").first()
    attach_bmc(node)
    client = _client(operator)
    url = f"/reservations/power/{pool.pk}/"
    client.post(url, _policy_form(idle_after_min="0", buffer_nodes="0", buffer_percent="0"))
    client.post(url, {"form": "dry-run"})
    page = client.get(url).content.decode()
    assert f"would power off {node.name}: idle for" in page
    assert Node.objects.get(pk=node.pk).power_state == "on"


def test_auditors_read_without_forms_and_tenants_get_404(pool, auditor, admin_a, member_a):
    url = f"/reservations/power/{pool.pk}/"
    page = _client(auditor).get(url)
    assert page.status_code == 200
    assert 'method="post"' not in page.content.decode().split("<main", 1)[1].split("</main>")[0]
    assert _client(auditor).post(url, _policy_form()).status_code == 403
    for user in (admin_a, member_a):
        assert _client(user).get(url).status_code == 404
        assert _client(user).get("/reservations/power/").status_code == 404
        assert _client(user).post(url, _policy_form()).status_code == 404
    assert not PoolPowerPolicy.objects.exists()
