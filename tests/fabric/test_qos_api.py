"""``GET/PUT /api/fabrics/{id}/qos/``: roles, validation before anything is stored, audit, the
rendered options, the ports a push reprograms and the pending diff (no lab needed)."""

from __future__ import annotations

import copy

import pytest

from console.fabric import hooks
from console.fabric.models import ChangeRequest, Fabric, FabricQos
from console.tenancy.models import AuditEntry
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401
from tests.fabric.pipeline_fixtures import *  # noqa: F403
from tests.fabric.pipeline_fixtures import assert_error
from tests.fabric.test_qos_table import table_json

pytestmark = pytest.mark.django_db

TABLE = table_json((3, 1, "low", 200), (4, 2, "high", 48), (0, 0, "low", 55), high_limit=8)


@pytest.fixture
def fabric(su1_revision):  # noqa: F811
    """A fabric bound to the saved 1-SU design (32 DGX H100 × 8 HCAs, 8 leaves, 4 spines)."""
    return Fabric.objects.create(name="qos-api", driver="lab", revision=su1_revision, config={"workdir": "/none"})


def url(fabric: Fabric) -> str:
    return f"/api/fabrics/{fabric.pk}/qos/"


def test_get_shows_the_default_and_what_it_renders(fabric, client_for, operator, auditor):
    for user in (operator, auditor):
        body = client_for(user).get(url(fabric)).json()
        assert body["is_default"] is True and body["table"] == body["default"]
        assert body["table"]["classes"]["inference"]["table"] == "high"
        assert body["rendered"]["qos_vlarb_high"] == "2:64"
        assert body["rendered"]["qos_sl2vl"] == "0,1,2" + ",0" * 13
    affected = body["affected_ports"]
    # the 1-SU design: 256 HCA ports on 8 rail leaves, each leaf 32 down + 32 up to 4 spines
    assert affected["hca_ports"] == 256
    assert affected["switch_ports"] == 256 + 2 * 256
    assert len(affected["switches"]) == 12


def test_tenant_users_get_403_and_auditors_cannot_write(fabric, client_for, admin_a, member_a, auditor):
    for user in (admin_a, member_a):
        assert client_for(user).get(url(fabric)).status_code == 403
        assert client_for(user).put(url(fabric), TABLE, format="json").status_code == 403
    assert client_for(auditor).put(url(fabric), TABLE, format="json").status_code == 403
    assert client_for(auditor).get("/api/fabrics/999999/qos/").status_code == 404
    assert not FabricQos.objects.exists()


def test_put_stores_audits_and_shows_the_pending_diff(fabric, client_for, operator):
    response = client_for(operator).put(url(fabric), TABLE, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["is_default"] is False and body["table"] == TABLE
    assert body["rendered"] == {
        "qos_max_vls": "8",
        "qos_high_limit": "8",
        "qos_vlarb_high": "2:48",
        "qos_vlarb_low": "0:55,1:200",
        "qos_sl2vl": "0,0,0,1,2" + ",0" * 11,
    }
    # nothing applied yet: the diff adds the QoS options (the table is saved, not pushed)
    assert "+++ desired/qos-options" in body["pending_diff"]
    assert "+qos_vlarb_low 0:55,1:200" in body["pending_diff"]
    assert not ChangeRequest.objects.exists()
    entry = AuditEntry.objects.get(action="fabric.qos.create")
    assert entry.after["table"] == TABLE
    again = client_for(operator).put(url(fabric), {**TABLE, "high_limit": 9}, format="json")
    assert again.status_code == 200
    update = AuditEntry.objects.get(action="fabric.qos.update")
    assert update.before["table"]["high_limit"] == 8 and update.after["table"]["high_limit"] == 9


@pytest.mark.parametrize(
    ("change", "field_text"),
    [
        (lambda t: t["classes"]["training"].update(vl=8), "training: VL 8 not below max_vls=8"),
        (lambda t: t["classes"]["inference"].update(sl=3), "inference: SL 3 already used by training"),
        (lambda t: t["classes"]["best-effort"].update(weight=256), "best-effort: weight 256 outside 0-255"),
        (lambda t: t.update(high_limit=256), "high_limit=256"),
        (lambda t: t["classes"].pop("inference"), "classes must be exactly"),
    ],
)
def test_put_refuses_a_broken_table_with_the_reason(fabric, client_for, operator, change, field_text):
    broken = copy.deepcopy(TABLE)
    change(broken)
    body = assert_error(client_for(operator).put(url(fabric), broken, format="json"), 400, field="classes")
    assert any(field_text in e for e in body["fields"]["classes"]), body
    assert not FabricQos.objects.exists()
    assert not AuditEntry.objects.filter(action__startswith="fabric.qos").exists()


def test_put_refuses_to_orphan_a_live_reservations_sl(fabric, client_for, operator, monkeypatch):
    monkeypatch.setitem(
        hooks.registry.partitions_providers,
        "scheduling",
        lambda fabric_id: [{"reservation_id": 7, "tenant_id": 1, "name": "res-7", "pkey": 9, "sl": 1, "members": []}],
    )
    body = assert_error(client_for(operator).put(url(fabric), TABLE, format="json"), 409)
    assert "SL 1 is used by reservation(s) 7" in body["detail"]
    keeps = copy.deepcopy(TABLE)
    keeps["classes"]["training"]["sl"] = 1
    assert client_for(operator).put(url(fabric), keeps, format="json").status_code == 200


# --- the page ---------------------------------------------------------------------------------


def form(table: dict, action: str = "save") -> dict[str, str]:
    data = {"action": action, "max_vls": str(table["max_vls"]), "high_limit": str(table["high_limit"])}
    for name, row in table["classes"].items():
        for key, value in row.items():
            data[f"{name}-{key}"] = str(value)
    return data


def page(fabric: Fabric) -> str:
    return f"/fabrics/{fabric.pk}/qos/"


def test_page_reads_for_operators_and_auditors_and_is_404_for_tenants(fabric, client, operator, auditor, admin_a):
    for user in (operator, auditor):
        client.force_login(user)
        html = client.get(page(fabric)).content.decode()
        assert 'data-testid="qos-row-inference"' in html and "qos_vlarb_high 2:64" in html
        assert "768 switch ports and 256 HCA ports" in html
        assert ('data-testid="qos-save"' in html) is (user == operator)
    client.force_login(auditor)
    assert client.post(page(fabric), form(TABLE)).status_code == 403
    client.force_login(admin_a)
    assert client.get(page(fabric)).status_code == 404
    assert not FabricQos.objects.exists()


def test_page_saves_refuses_broken_input_and_previews_the_change(fabric, client, operator):
    client.force_login(operator)
    broken = copy.deepcopy(TABLE)
    broken["classes"]["inference"]["vl"] = 8
    refused = client.post(page(fabric), form(broken))
    assert refused.status_code == 400
    assert "inference: VL 8 not below max_vls=8" in refused.content.decode()
    assert not FabricQos.objects.exists()

    saved = client.post(page(fabric), form(TABLE))
    assert saved.status_code == 302 and saved["Location"] == page(fabric)
    assert FabricQos.objects.get(fabric=fabric).table == TABLE
    html = client.get(page(fabric)).content.decode()
    assert "+qos_vlarb_high 2:48" in html  # the pending diff

    preview = client.post(page(fabric), {"action": "preview"})
    change = ChangeRequest.objects.get(fabric=fabric)
    assert preview.status_code == 302 and preview["Location"] == f"/fabrics/{fabric.pk}/changes/{change.pk}/"
    assert change.dry_run and change.status == ChangeRequest.Status.PREVIEWED
    assert "+qos_sl2vl 0,0,0,1,2" in change.diff
