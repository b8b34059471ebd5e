"""Desired state and isolation, without a lab: service partitions are built from the allowed
tenants' reservations, a partition that lets two tenants' hosts talk is refused with the pair
named (set by an operator, or reached by a reconcile), and the API says so."""

from __future__ import annotations

import pytest

from console.fabric import changes, hooks
from console.fabric.changes.desired import build_desired
from console.fabric.models import ChangeRequest, Fabric, FabricPartition
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import AuditEntry, Principal, Role
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)
A = ["0x0002c90300000101", "0x0002c90300000102"]
B = ["0x0002c90300000201", "0x0002c90300000202"]
STORAGE = "0x0002c90300000901"


@pytest.fixture
def fabric(su1_revision, tenant_a, tenant_b, monkeypatch) -> Fabric:  # noqa: F811 (fixture)
    """A fabric whose scheduling provider wants one reservation of each tenant."""
    made = Fabric.objects.create(name="iso", driver="opensm", revision=su1_revision, config={"directory": "/none"})
    wanted = [
        {
            "reservation_id": 1,
            "tenant_id": tenant_a.pk,
            "name": "res-1",
            "pkey": 0x0101,
            "sl": 0,
            "members": [[g, "full"] for g in A],
        },
        {
            "reservation_id": 2,
            "tenant_id": tenant_b.pk,
            "name": "res-2",
            "pkey": 0x0102,
            "sl": 0,
            "members": [[g, "full"] for g in B],
        },
    ]
    monkeypatch.setitem(hooks.registry.partitions_providers, "scheduling", lambda fabric_id: wanted)
    return made


def test_a_service_partition_takes_the_allowed_tenants_hosts_as_limited_members(fabric, tenant_a, tenant_b):
    access = changes.service_access([tenant_a.slug], "lustre")
    changes.set_partition(ACTOR, OPERATOR, fabric, name="storage", pkey="0x0042", members=[STORAGE], service=access)
    desired = build_desired(fabric)
    storage = next(p for p in desired["partitions"] if p["name"] == "storage")
    assert storage["source"] == "service" and storage["tenants"] == [tenant_a.pk]
    assert sorted(storage["members"]) == sorted([[STORAGE, "full"], *([g, "limited"] for g in A)])
    default = desired["partitions"][0]
    assert default["members"] == [["ALL", "limited"], ["ALL_SWITCHES", "full"], ["SELF", "full"]]
    # B allowed too: its hosts join, still limited
    access = changes.service_access([tenant_a.slug, tenant_b.pk], "lustre")
    changes.set_partition(ACTOR, OPERATOR, fabric, name="storage", pkey="0x0042", members=[STORAGE], service=access)
    storage = next(p for p in build_desired(fabric)["partitions"] if p["name"] == "storage")
    assert {port for port, m in storage["members"] if m == "limited"} == {*A, *B}
    entry = AuditEntry.objects.filter(action="fabric.partition.update").latest("pk")
    assert entry.before["allowed_tenants"] == [tenant_a.pk] and entry.after["allowed_tenants"] == sorted(
        [tenant_a.pk, tenant_b.pk]
    )


def test_unknown_tenants_are_named(fabric):
    with pytest.raises(Invalid, match="no tenant nobody"):
        changes.service_access(["nobody"], "")


def test_a_manual_partition_joining_two_tenants_is_refused_with_the_pair_named(fabric, tenant_a, tenant_b):
    with pytest.raises(Conflict) as refused:
        changes.set_partition(ACTOR, OPERATOR, fabric, name="shared", pkey="0x0050", members=[A[0], f"{B[0]}=limited"])
    assert (
        "Tenant A's" in refused.value.detail
        and "Tenant B's" in refused.value.detail
        and "0x0050" in refused.value.detail
    )
    assert not FabricPartition.objects.filter(fabric=fabric, name="shared").exists()
    # both limited: they cannot talk, it is accepted
    changes.set_partition(
        ACTOR, OPERATOR, fabric, name="shared", pkey="0x0050", members=[f"{A[0]}=limited", f"{B[0]}=limited"]
    )


def test_a_reconcile_reaching_a_leak_records_one_refused_change(fabric, tenant_a, monkeypatch, su1_revision):  # noqa: F811
    # an operator's partition of free hosts, accepted; then scheduling gives one of them to each tenant
    hosts = ["0x0002c90300000301", "0x0002c90300000302"]
    changes.set_partition(ACTOR, OPERATOR, fabric, name="lab-bench", pkey="0x0060", members=hosts)
    wanted = hooks.registry.partitions_providers["scheduling"](fabric.pk)
    wanted[0]["members"].append([hosts[0], "full"])
    wanted[1]["members"].append([hosts[1], "full"])
    first = changes.reconcile(fabric, actor=ACTOR)
    assert first is not None and first.status == ChangeRequest.Status.FAILED
    assert first.error.startswith("isolation:") and "0x0060" in first.error
    assert changes.reconcile(fabric, actor=ACTOR) is None  # the same refusal is not recorded again
    assert ChangeRequest.objects.filter(fabric=fabric).count() == 1
    assert AuditEntry.objects.filter(action="fabric.change.refused").count() == 1


def test_the_partition_api_creates_service_partitions_and_shows_them(fabric, client, make_user, tenant_a):
    client.force_login(make_user("op", Role.OPERATOR))
    url = f"/api/fabrics/{fabric.pk}/partitions/"
    body = {
        "name": "login",
        "pkey": "0x0041",
        "members": [STORAGE],
        "source": "service",
        "allowed_tenants": [tenant_a.slug],
    }
    made = client.post(url, body, content_type="application/json")
    assert made.status_code == 201, made.json()
    assert made.json()["source"] == "service" and made.json()["allowed_tenants"] == [tenant_a.pk]
    bad = client.post(
        url, {**body, "name": "x", "pkey": "0x0043", "source": "operator"}, content_type="application/json"
    )
    assert bad.status_code == 400
    leak = client.post(url, {"name": "y", "pkey": "0x0044", "members": [A[0], B[1]]}, content_type="application/json")
    assert leak.status_code == 409 and "isolation" in leak.json()["detail"]
