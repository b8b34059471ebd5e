"""The fabric API and CLI: roles, isolation, precise 400s, approval rules, audit, and a real push
through a real Celery worker and the real lab."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from console.fabric.models import AppliedState, ChangeRequest, FabricPartition
from console.tenancy.models import AuditEntry, Role
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import with_agent
from tests.fabric.pipeline_fixtures import *  # noqa: F403
from tests.fabric.pipeline_fixtures import assert_error, hca_guids, lids, wait_for

GUID = "0x0002c90300002001"


@pytest.fixture
def fabric(make_fabric):
    return make_fabric("api-fabric", workdir="/nonexistent")


@pytest.fixture
def op2(make_user):
    return make_user("op2", Role.OPERATOR)


def url(fabric, tail: str = "") -> str:
    return f"/api/fabrics/{fabric.pk}/{tail}"


# --- roles and isolation ----------------------------------------------------------------------


@pytest.mark.django_db
def test_tenant_users_cannot_see_or_change_fabrics(fabric, client_for, admin_a, member_a):
    FabricPartition.objects.create(fabric=fabric, name="p", pkey=3, members=[[GUID, "full"]])
    for user in (admin_a, member_a):
        client = client_for(user)
        for path in (
            "/api/fabrics/",
            f"/api/fabrics/{fabric.pk}/",
            url(fabric, "partitions/"),
            url(fabric, "changes/"),
        ):
            assert client.get(path).status_code == 403, path
        assert client.post("/api/fabrics/", {"name": "x"}, format="json").status_code == 403
        response = client.post(
            url(fabric, "partitions/"), {"name": "q", "pkey": "0x0004", "members": [GUID]}, format="json"
        )
        assert response.status_code == 403
        assert client.post(url(fabric, "changes/"), {}, format="json").status_code == 403
        assert client.delete(url(fabric, "partitions/1/")).status_code in (403, 404)
    assert FabricPartition.objects.filter(fabric=fabric).count() == 1
    assert not ChangeRequest.objects.exists()


@pytest.mark.django_db
def test_auditor_reads_but_cannot_write(fabric, client_for, auditor, client):
    reader = client_for(auditor)
    assert reader.get("/api/fabrics/").status_code == 200
    assert reader.get(url(fabric, "changes/")).status_code == 200
    assert reader.post(url(fabric, "changes/"), {"dry_run": True}, format="json").status_code == 403
    assert client.get("/api/fabrics/").status_code in (401, 403)


@pytest.mark.django_db
def test_unknown_fabric_is_404(client_for, operator):
    client = client_for(operator)
    assert_error(client.get("/api/fabrics/999999/partitions/"), 404)
    assert_error(client.post("/api/fabrics/999999/changes/", {}, format="json"), 404)


# --- precise 400s -------------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("payload", "field", "needle"),
    [
        ({"name": "p", "pkey": "0x8001", "members": [GUID]}, "pkey", "outside"),
        ({"name": "p", "pkey": "0x7fff", "members": [GUID]}, "pkey", "Default"),
        ({"name": "p", "pkey": "zz", "members": [GUID]}, "pkey", "not a number"),
        ({"name": "p", "pkey": "0x0003", "members": ["0x12345G"]}, "members", "not a port GUID"),
        ({"name": "p", "pkey": "0x0003", "members": ["0123"]}, "members", "not a port GUID"),
        ({"name": "p", "pkey": "0x0003", "members": [f"{GUID}=limitd"]}, "members", "limitd"),
        ({"name": "p", "pkey": "0x0003", "members": [GUID, f"{GUID}=full"]}, "members", "already"),
        ({"name": "bad name!", "pkey": "0x0003", "members": [GUID]}, "name", "must be"),
        ({"name": "p", "pkey": "0x0003", "members": [42]}, "members", "expected"),
    ],
)
def test_bad_partition_input_is_a_precise_400(fabric, client_for, operator, payload, field, needle):
    response = client_for(operator).post(url(fabric, "partitions/"), payload, format="json")
    body = assert_error(response, 400, "invalid", field)
    assert needle in json.dumps(body), body
    assert not FabricPartition.objects.exists()


@pytest.mark.django_db
def test_duplicate_pkey_is_409_and_partitions_are_audited(fabric, client_for, operator):
    client = client_for(operator)
    created = client.post(
        url(fabric, "partitions/"), {"name": "train", "pkey": "0x0003", "members": [f"{GUID}=limited"]}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["pkey"] == "0x0003"
    assert created.json()["members"] == [[GUID, "limited"]]
    assert_error(
        client.post(url(fabric, "partitions/"), {"name": "other", "pkey": "0x0003", "members": [GUID]}, format="json"),
        409,
        "conflict",
        "pkey",
    )
    pid = created.json()["id"]
    patched = client.patch(url(fabric, f"partitions/{pid}/"), {"members": [GUID]}, format="json")
    assert patched.status_code == 200 and patched.json()["members"] == [[GUID, "full"]]
    assert client.delete(url(fabric, f"partitions/{pid}/")).status_code == 204
    actions = list(
        AuditEntry.objects.filter(action__startswith="fabric.partition").order_by("id").values_list("action", flat=True)
    )
    assert actions == ["fabric.partition.create", "fabric.partition.update", "fabric.partition.delete"]
    assert all(e.actor_kind == "token" for e in AuditEntry.objects.filter(action__startswith="fabric."))


@pytest.mark.django_db
def test_bad_change_and_fabric_input_is_400(fabric, client_for, operator, revision):
    client = client_for(operator)
    assert_error(client.post(url(fabric, "changes/"), {"dry_run": "perhaps"}, format="json"), 400, "invalid", "dry_run")
    assert_error(
        client.post(
            "/api/fabrics/", {"name": "f2", "revision": revision.pk, "pkey_min": 9, "pkey_max": 3}, format="json"
        ),
        400,
        "invalid",
    )
    assert_error(
        client.post("/api/fabrics/", {"name": "f3", "revision": 999999}, format="json"), 400, "invalid", "revision"
    )


# --- change requests ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_dry_run_over_the_api_previews_and_changes_nothing(fabric, client_for, operator):
    client = client_for(operator)
    client.post(url(fabric, "partitions/"), {"name": "train", "pkey": "0x0003", "members": [GUID]}, format="json")
    response = client.post(url(fabric, "changes/"), {"dry_run": True, "reason": "look"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["status"] == "previewed" and body["is_terminal"]
    assert "+train=0x0003" in body["diff"]
    assert body["steps"][0]["name"] == "plan"
    assert not fabric.changes.exclude(status="previewed").exists()


@pytest.mark.django_db
def test_approval_needs_another_operator(fabric, client_for, operator, op2):
    fabric.approval_required = True
    fabric.save()
    mine, other = client_for(operator), client_for(op2)
    created = mine.post(url(fabric, "changes/"), {"reason": "resv"}, format="json").json()
    assert created["status"] == "pending_approval"
    cid = created["id"]
    assert_error(mine.post(url(fabric, f"changes/{cid}/approve/")), 403, "permission_denied")
    approved = other.post(url(fabric, f"changes/{cid}/approve/"))
    assert approved.status_code == 200 and approved.json()["status"] == "queued"
    assert_error(other.post(url(fabric, f"changes/{cid}/approve/")), 409, "conflict")
    second = mine.post(url(fabric, "changes/"), {}, format="json").json()
    cancelled = other.post(url(fabric, f"changes/{second['id']}/cancel/"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert_error(other.post(url(fabric, f"changes/{second['id']}/cancel/")), 409, "conflict")
    actions = set(AuditEntry.objects.values_list("action", flat=True))
    assert {"fabric.change.create", "fabric.change.approve", "fabric.change.cancel"} <= actions


# --- a real push: API and CLI through a real worker on the real lab ---------------------------


@requires_lab
@pytest.mark.lab
@pytest.mark.timeout(240)
def test_api_and_cli_push_through_a_worker(worker, start_lab, make_fabric, client_for, operator, lab_console):
    lab = start_lab("api")
    fabric = with_agent(make_fabric("api-lab", workdir=str(lab.workdir), verify_timeout=8), lab_console)
    # the reconcile the agent's hello asked for, run by the worker: the fabric's first push
    wait_for(lambda: AppliedState.objects.filter(fabric=fabric).exists(), timeout=60)
    applied_before = AuditEntry.objects.filter(action="fabric.change.applied").count()
    g = hca_guids(lab)
    client = client_for(operator)
    # API: a partition, then a change; the worker pushes it and the API shows the steps
    members = [f"{g[f'hca{i:02d}']:#018x}" + ("=limited" if i == 3 else "") for i in (1, 2, 3)]
    assert (
        client.post(
            url(fabric, "partitions/"), {"name": "train", "pkey": "0x0007", "members": members}, format="json"
        ).status_code
        == 201
    )
    cid = client.post(url(fabric, "changes/"), {"reason": "api"}, format="json").json()["id"]
    body = wait_for(lambda: (b := client.get(url(fabric, f"changes/{cid}/")).json())["is_terminal"] and b, timeout=60)
    assert body["status"] == "applied", body
    assert body["progress"]["percent"] == 100
    # (the fabric's keys went into opensm.conf with that first push)
    assert [s["name"] for s in body["steps"]] == ["plan", "render", "lint", "swap", "reload", "verify"]
    assert lab.diags().pkeys(lids(lab)["hca03"]).membership(0x0007) == "limited"
    # CLI: partition set --wait --json → verified, exit 0
    out = StringIO()
    call_command(
        "fabric",
        "partition",
        "set",
        "--fabric",
        fabric.name,
        "--name",
        "cli",
        "--pkey",
        "0x0008",
        "--member",
        f"{g['hca05']:#018x}=full",
        "--member",
        f"{g['hca06']:#018x}=limited",
        "--wait",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result["ok"] and result["status"] == "applied", result
    assert lab.diags().pkeys(lids(lab)["hca06"]).membership(0x0008) == "limited"
    # CLI: a member not on the fabric → applied, the absent port a finding in the outcome
    # (one dead host blocks nobody), exit 0
    out = StringIO()
    call_command(
        "fabric",
        "partition",
        "set",
        "--fabric",
        str(fabric.pk),
        "--name",
        "ghost",
        "--pkey",
        "0x0009",
        "--member",
        "0x0002c903deadbe01",
        "--wait",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result["status"] == "applied" and result["ok"]
    assert result["change"]["outcome"]["absent_members"] == {"0x0009": ["0x0002c903deadbe01"]}
    # CLI: delete the ghost → pushed away; verified, exit 0
    out = StringIO()
    call_command(
        "fabric", "partition", "delete", "--fabric", fabric.name, "--name", "ghost", "--wait", "--json", stdout=out
    )
    assert json.loads(out.getvalue())["status"] == "applied"
    out = StringIO()
    call_command("fabric", "apply", "--fabric", fabric.name, "--wait", "--json", stdout=out)
    assert json.loads(out.getvalue())["status"] == "unchanged"
    out = StringIO()
    call_command("fabric", "apply", "--fabric", fabric.name, "--dry-run", "--json", stdout=out)
    assert json.loads(out.getvalue())["status"] == "previewed"
    assert AuditEntry.objects.filter(action="fabric.change.applied").count() == applied_before + 4


# --- the progress page -------------------------------------------------------------------------


@pytest.mark.django_db
def test_progress_page_shows_steps_and_polls_the_api(fabric, session_client_for, operator, member_a):
    from console.fabric import changes
    from tests.fabric.pipeline_fixtures import OPERATOR, SYSTEM

    change = changes.request_change(SYSTEM, OPERATOR, fabric, dry_run=True, reason="look")
    page = f"/fabrics/{fabric.pk}/changes/{change.pk}/"
    html = session_client_for(operator).get(page).content.decode()
    for testid in ("change-status", "change-progress", "change-steps", "change-diff"):
        assert f'data-testid="{testid}"' in html
    assert 'data-step="plan"' in html and "previewed" in html
    assert f"/api/fabrics/{fabric.pk}/changes/{change.pk}/" in html  # what the page polls
    assert session_client_for(member_a).get(page).status_code == 404
    assert session_client_for(operator).get(f"/fabrics/{fabric.pk}/changes/999999/").status_code == 404
