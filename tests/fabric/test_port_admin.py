"""Switch port administration: enable/disable, enabled link width and speed, through the service,
the API and the CLI; checked against the design, audited, pushed and read back on the real lab.

The fabrics here are bound to a revision of the lab's own design (the 2x4x24 fat tree imported
from its ibnetdiscover file): switches spine1-2 and leaf1-4, eight ports each.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from console.fabric import changes
from console.fabric.changes.desired import build_desired, render_artefacts
from console.fabric.changes.pipeline import apply_change
from console.fabric.diags.runner import DiagEnv, DiagRunner
from console.fabric.drivers.base import SPEED_NAMES, WIDTH_NAMES, DesiredFabric, decode_enabled
from console.fabric.models import ChangeRequest, PortAdminState
from console.tenancy.errors import Invalid, NotFound
from console.tenancy.models import AuditEntry, Principal, Role
from designer.imports.ibnetdiscover import graph_from_ibnetdiscover
from designer.models import Design, DesignRevision
from designer.serialize import graph_to_dict
from designer.services import load_catalogue
from tests.fabric.conftest import NET_FILE, requires_lab
from tests.fabric.pipeline_fixtures import *  # noqa: F403
from tests.fabric.pipeline_fixtures import OPERATOR, SYSTEM, assert_error, lids

Status = ChangeRequest.Status


@pytest.fixture
def revision(db) -> DesignRevision:
    """The lab's own design (overrides the graph-less one of pipeline_fixtures)."""
    graph = graph_from_ibnetdiscover(NET_FILE.read_text(), load_catalogue())
    design = Design.objects.create(name="lab-2x4x24", topology="fat-tree")
    return DesignRevision.objects.create(design=design, number=1, graph=graph_to_dict(graph), summary={})


@pytest.fixture
def fabric(make_fabric):
    return make_fabric("port-fabric", workdir="/nonexistent")


def url(fabric, tail: str = "") -> str:
    return f"/api/fabrics/{fabric.pk}/ports/{tail}"


def read_port(lab, switch: str, port: int) -> dict[str, str]:
    fields = lab.diags(timeout=10).port_state(lids(lab)[switch], port).fields
    return {k: fields.get(k, "") for k in ("LinkWidthEnabled", "LinkSpeedEnabled", "PhysLinkState")}


# --- desired state and parsing (no lab) ---------------------------------------------------------


def test_enabled_masks_decode_as_ibportstate_prints_them():
    assert decode_enabled("1X or 4X", WIDTH_NAMES) == 3
    assert decode_enabled("1X", WIDTH_NAMES) == 1
    assert decode_enabled("2.5 Gbps or 5.0 Gbps or 10.0 Gbps", SPEED_NAMES) == 7
    assert decode_enabled("", WIDTH_NAMES) is None
    assert decode_enabled("3X", WIDTH_NAMES) is None


def test_ibportstate_width_and_speed_need_an_integer_code():
    runner = DiagRunner(DiagEnv())
    for op, value in (("width", None), ("width", True), ("speed", "1"), ("speed", 0), ("enable", 1), ("bounce", None)):
        with pytest.raises(ValueError):
            runner.set_port_state(1, 1, op, value)


@pytest.mark.django_db
def test_desired_json_carries_width_and_speed_only_when_set(fabric):
    PortAdminState.objects.create(fabric=fabric, switch="leaf3", port=6, enabled=False)
    assert build_desired(fabric)["port_admin"] == [
        {"switch": "leaf3", "port": 6, "enabled": False}
    ]  # exactly what it was before width/speed existed
    assert render_artefacts(build_desired(fabric))["port-admin"] == "leaf3[6] disabled\n"
    changes.set_port_admin(SYSTEM, OPERATOR, fabric, switch="leaf1", port=2, width="1X", speed="10.0")
    desired = build_desired(fabric)
    assert desired["port_admin"][0] == {"switch": "leaf1", "port": 2, "enabled": True, "width": 1, "speed": 4}
    state = DesiredFabric.from_json(desired)
    assert (state.port_admin[0].width, state.port_admin[0].speed) == (1, 4)
    assert "leaf1[2] enabled width=1X speed=10.0 Gbps" in render_artefacts(desired)["port-admin"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kwargs", "field", "needle"),
    [
        ({"switch": "leaf9", "port": 1}, "switch", "not in the design"),
        ({"switch": "leaf1", "port": 9}, "port", "ports are 1..8"),
        ({"switch": "leaf1", "port": 0}, "port", "ports are 1..8"),
        ({"switch": "leaf1", "port": "x"}, "port", "not a port number"),
        ({"switch": "leaf1", "port": 1, "width": "3X"}, "width", "not one of"),
        ({"switch": "leaf1", "port": 1, "width": 3}, "width", "not one of"),
        ({"switch": "leaf1", "port": 1, "speed": "7.5"}, "speed", "not one of"),
        ({"switch": "leaf1", "port": 1, "speed": 8}, "speed", "not one of"),
    ],
)
def test_bad_port_input_is_refused_precisely(fabric, kwargs, field, needle):
    with pytest.raises(Invalid) as err:
        changes.set_port_admin(SYSTEM, OPERATOR, fabric, **kwargs)
    assert field in err.value.fields and needle in err.value.detail, err.value.as_dict()
    assert not PortAdminState.objects.exists()


@pytest.mark.django_db
def test_a_design_without_switches_refuses_every_switch(revision):
    from console.fabric.models import Fabric

    empty = DesignRevision.objects.create(design=revision.design, number=2, graph={}, summary={})
    fabric = Fabric.objects.create(name="empty", revision=empty, config={})
    with pytest.raises(Invalid, match="has no switches"):
        changes.set_port_admin(SYSTEM, OPERATOR, fabric, switch="leaf1", port=1)


# --- API ----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_operator_administers_ports_over_the_api_audited(fabric, client_for, operator):
    client = client_for(operator)
    created = client.post(
        url(fabric),
        {"switch": "leaf3", "port": 6, "enabled": False, "width": "1X", "reason": "bad cable"},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["switch"], body["port"], body["enabled"], body["width"], body["speed"]) == (
        "leaf3",
        6,
        False,
        "1X",
        None,
    )
    assert [r["id"] for r in client.get(url(fabric)).json()["results"]] == [body["id"]]
    assert_error(client.post(url(fabric), {"switch": "leaf3", "port": 6}, format="json"), 400, "invalid", "port")
    patched = client.patch(url(fabric, f"{body['id']}/"), {"speed": "10.0", "enabled": True}, format="json")
    assert patched.status_code == 200, patched.content
    assert (patched.json()["speed"], patched.json()["width"], patched.json()["enabled"]) == ("10.0 Gbps", "1X", True)
    assert_error(client.patch(url(fabric, f"{body['id']}/"), {"port": 5}, format="json"), 400, "invalid", "port")
    preview = client.post(f"/api/fabrics/{fabric.pk}/changes/", {"dry_run": True}, format="json")
    assert "+leaf3[6] enabled width=1X speed=10.0 Gbps" in preview.json()["diff"]
    assert client.delete(url(fabric, f"{body['id']}/")).status_code == 204
    assert not PortAdminState.objects.exists()
    actions = list(
        AuditEntry.objects.filter(action__startswith="fabric.port.").order_by("id").values_list("action", flat=True)
    )
    assert actions == ["fabric.port.create", "fabric.port.update", "fabric.port.delete"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("payload", "field", "needle"),
    [
        ({"switch": "leaf9", "port": 1}, "switch", "not in the design"),
        ({"switch": "leaf1", "port": 9}, "port", "ports are 1..8"),
        ({"switch": "leaf1", "port": 300}, "port", ""),
        ({"switch": "leaf1", "port": 1, "width": "3X"}, "width", "not one of"),
        ({"switch": "leaf1", "port": 1, "speed": "fast"}, "speed", "not one of"),
        ({"switch": "leaf1", "port": 1, "enabled": "perhaps"}, "enabled", ""),
    ],
)
def test_bad_port_input_is_a_precise_400(fabric, client_for, operator, payload, field, needle):
    response = client_for(operator).post(url(fabric), payload, format="json")
    body = assert_error(response, 400, "invalid", field)
    assert needle in json.dumps(body), body
    assert not PortAdminState.objects.exists()


@pytest.mark.django_db
def test_auditors_read_ports_tenants_get_403(fabric, client_for, auditor, admin_a, member_a):
    row = PortAdminState.objects.create(fabric=fabric, switch="leaf1", port=1, enabled=False)
    reader = client_for(auditor)
    assert reader.get(url(fabric)).status_code == 200
    assert reader.get(url(fabric, f"{row.pk}/")).status_code == 200
    assert_error(reader.post(url(fabric), {"switch": "leaf1", "port": 2}, format="json"), 403)
    assert_error(reader.patch(url(fabric, f"{row.pk}/"), {"enabled": True}, format="json"), 403)
    assert_error(reader.delete(url(fabric, f"{row.pk}/")), 403)
    for user in (admin_a, member_a):
        client = client_for(user)
        assert client.get(url(fabric)).status_code == 403
        assert client.post(url(fabric), {"switch": "leaf1", "port": 2}, format="json").status_code == 403
    with pytest.raises(Exception, match="only operators"):
        changes.set_port_admin(SYSTEM, Principal(None, Role.AUDITOR, None), fabric, switch="leaf1", port=2)
    row.refresh_from_db()
    assert not row.enabled and PortAdminState.objects.count() == 1
    assert_error(client_for(auditor).get("/api/fabrics/999999/ports/"), 404)


# --- CLI (no lab) -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--switch", "leaf9", "--port", "1"], "switch"),
        (["--switch", "leaf1", "--port", "9"], "port"),
        (["--switch", "leaf1", "--port", "1", "--width", "3X"], "width"),
        (["--switch", "leaf1", "--port", "1", "--speed", "7.5"], "speed"),
    ],
)
def test_cli_bad_port_input_exits_non_zero_with_the_error(fabric, args, field):
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("fabric", "port", "set", "--fabric", fabric.name, *args, "--json", stdout=out)
    body = json.loads(out.getvalue())
    assert body["code"] == "invalid" and field in body["fields"], body
    assert not PortAdminState.objects.exists() and not ChangeRequest.objects.exists()


@pytest.mark.django_db
def test_cli_clear_of_an_unadministered_port_is_refused(fabric):
    out = StringIO()
    with pytest.raises(CommandError, match="does not administer"):
        call_command(
            "fabric", "port", "clear", "--fabric", fabric.name, "--switch", "leaf1", "--port", "1", "--json", stdout=out
        )
    assert json.loads(out.getvalue())["code"] == "not_found"
    with pytest.raises(NotFound):
        changes.clear_port_admin(SYSTEM, OPERATOR, fabric, switch="leaf1", port=1)


# --- on the real lab ----------------------------------------------------------------------------


@requires_lab
@pytest.mark.lab
@pytest.mark.timeout(240)
@pytest.mark.django_db
def test_width_and_speed_are_pushed_read_back_and_restored(lab_fabric):
    lab, fabric = lab_fabric
    before = read_port(lab, "leaf3", 6)
    assert before["LinkWidthEnabled"] == "1X or 4X" and before["LinkSpeedEnabled"] == "2.5 Gbps"
    # width 1X (speed 2.5 Gbps, as it is): pushed, the port step verified by reading it back
    changes.set_port_admin(
        SYSTEM, OPERATOR, fabric, switch="leaf3", port=6, width="1X", speed="2.5", reason="degrade for test"
    )
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.APPLIED, change.error
    step = change.steps.get(name="port-admin")
    assert step.target == "leaf3[6]" and step.status == "ok", step.log
    assert "width 1: exit 0" in step.log and "speed" not in step.log.splitlines()[0]
    assert "reads back enabled width=1X speed=2.5 Gbps" in step.log
    after = read_port(lab, "leaf3", 6)
    assert after["LinkWidthEnabled"] == "1X" and after["LinkSpeedEnabled"] == "2.5 Gbps"
    assert after["PhysLinkState"] != "Disabled"
    assert changes.reconcile(fabric, actor=SYSTEM) is None  # the same state again: nothing
    # ibsim 0.10 ignores a LinkSpeedEnabled without 2.5 Gbps: the read-back says so, no guess
    changes.set_port_admin(SYSTEM, OPERATOR, fabric, switch="leaf3", port=6, width="1X", speed="10.0")
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.FAILED and "not enabled width=1X speed=10.0" in change.error
    step = change.steps.get(name="port-admin")
    assert step.status == "failed" and "did not read back" in step.log, step.log
    assert "speed=2.5 Gbps" in step.log.splitlines()[-1]
    # back to the design's 4X at 2.5 Gbps, then stop administering the port
    changes.set_port_admin(SYSTEM, OPERATOR, fabric, switch="leaf3", port=6, width="4X", speed="2.5")
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status == Status.APPLIED, change.error
    restored = read_port(lab, "leaf3", 6)
    assert restored["LinkWidthEnabled"] == "4X" and restored["LinkSpeedEnabled"] == "2.5 Gbps"
    changes.clear_port_admin(SYSTEM, OPERATOR, fabric, switch="leaf3", port=6)
    change = apply_change(changes.request_change(SYSTEM, OPERATOR, fabric).pk, worker_id="w")
    assert change.status in (Status.APPLIED, Status.UNCHANGED), change.error
    assert change.desired["port_admin"] == [] and "port-admin" not in change.artefacts
    assert read_port(lab, "leaf3", 6)["LinkWidthEnabled"] == "4X"


@requires_lab
@pytest.mark.lab
@pytest.mark.timeout(240)
@pytest.mark.django_db
def test_api_and_cli_administer_a_port_on_the_lab(lab_fabric, client_for, operator, settings):
    lab, fabric = lab_fabric
    settings.EMBEDDED = True  # --wait runs the push in this process (no worker here)
    client = client_for(operator)
    # API: administer leaf2[3] at 1X, request a change, push it
    created = client.post(url(fabric), {"switch": "leaf2", "port": 3, "width": "1X"}, format="json")
    assert created.status_code == 201, created.content
    cid = client.post(f"/api/fabrics/{fabric.pk}/changes/", {"reason": "api"}, format="json").json()["id"]
    assert apply_change(cid, worker_id="w").status == Status.APPLIED
    assert read_port(lab, "leaf2", 3)["LinkWidthEnabled"] == "1X"
    # CLI: set it back to 4X and disable it, --wait → verified, exit 0
    out = StringIO()
    call_command(
        "fabric",
        "port",
        "set",
        "--fabric",
        fabric.name,
        "--switch",
        "leaf2",
        "--port",
        "3",
        "--width",
        "4X",
        "--disable",
        "--reason",
        "unused",
        "--wait",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result["ok"] and result["status"] == "applied", result
    seen = read_port(lab, "leaf2", 3)
    assert seen["LinkWidthEnabled"] == "4X" and seen["PhysLinkState"] == "Disabled"
    row = PortAdminState.objects.get(fabric=fabric, switch="leaf2", port=3)
    assert (row.enabled, row.width, row.reason) == (False, 2, "unused")
    # CLI: --enable alone keeps the width; then clear stops administering it
    out = StringIO()
    call_command(
        "fabric",
        "port",
        "set",
        "--fabric",
        str(fabric.pk),
        "--switch",
        "leaf2",
        "--port",
        "3",
        "--enable",
        "--wait",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue())["status"] == "applied"
    assert read_port(lab, "leaf2", 3)["PhysLinkState"] != "Disabled"
    assert PortAdminState.objects.get(fabric=fabric).width == 2
    out = StringIO()
    call_command(
        "fabric",
        "port",
        "clear",
        "--fabric",
        fabric.name,
        "--switch",
        "leaf2",
        "--port",
        "3",
        "--wait",
        "--json",
        stdout=out,
    )
    assert json.loads(out.getvalue())["ok"]
    assert not PortAdminState.objects.filter(fabric=fabric).exists()
    # CLI bad input on a live fabric: non-zero exit, nothing requested
    count = ChangeRequest.objects.count()
    with pytest.raises(CommandError):
        call_command(
            "fabric",
            "port",
            "set",
            "--fabric",
            fabric.name,
            "--switch",
            "leaf2",
            "--port",
            "3",
            "--width",
            "16X",
            "--wait",
            "--json",
            stdout=StringIO(),
        )
    assert ChangeRequest.objects.count() == count
