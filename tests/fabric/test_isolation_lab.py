"""Tenant isolation proved on the wire: a 1-SU lab (OpenSM on ibsim, 256 HCAs), reservations of
two tenants made through the service, a storage service partition, pushes through the real
pipeline. Paths are asked of the SA here with saquery (``diags.path``), independently of the
audit under test.

    tenant A: 2 nodes × 8 HCAs ─┐
    tenant B: 2 nodes × 8 HCAs ─┼─ storage (su01-n31: 8 HCAs, full) ── limited members
    free hosts ─────────────────┘   (not in the storage partition: they reach only the SM)
"""

from __future__ import annotations

import itertools
import uuid

import pytest

from console.fabric import changes
from console.fabric.isolation import as_json, run_audit
from console.fabric.lab import faults
from console.fabric.lab.fabrics import start_lab, stop_lab
from console.fabric.models import FabricPartition
from console.telemetry.isolation import apply_audit, audit_fabric
from console.telemetry.models import FabricEvent
from console.tenancy.context import Actor
from console.tenancy.models import AuditEntry, Principal, Role
from designer.services import create_design
from scheduling.models import HCA, Node, Reservation
from scheduling.services import quotas
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import book, converge, whole_lab_pool, with_agent
from tests.fabric.rogue_sm import logged, rogue_sm, wait_for

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(300), pytest.mark.django_db]

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)
S = Reservation.Status
STORAGE_NODE = "su01-n31"


@pytest.fixture
def su1(tmp_path, tenant_a, tenant_b, transactional_db, lab_console):
    """The lab of a 1-SU design (its agent connected), pool ``su1`` without the storage node,
    quotas for A and B."""
    uid = uuid.uuid4().hex[:6]
    _, revision = create_design(ACTOR, OPERATOR, name=f"iso-{uid}", options=ONE_SU)
    fabric, lab = start_lab(
        revision, name=f"iso-{uid}", actor=ACTOR, workdir=tmp_path / "lab", socket_name=f"iso-{uid}"
    )
    try:
        with_agent(fabric, lab_console)
        pool = whole_lab_pool(fabric, ACTOR)
        pool.nodes.remove(Node.objects.get(fabric=fabric, name=STORAGE_NODE))  # a storage server
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
        quotas.set_quota(ACTOR, OPERATOR, tenant=tenant_b, pool=pool, guaranteed_gpus=64)
        yield fabric, lab, pool
    finally:
        fabric.refresh_from_db()
        stop_lab(fabric)


def node_guids(fabric, name: str) -> list[int]:
    return sorted(
        int(g, 16) for g in HCA.objects.filter(node__fabric=fabric, node__name=name).values_list("port_guid", flat=True)
    )


def guids_of(reservation: Reservation) -> list[int]:
    nodes = reservation.allocations.values("node_id")
    return sorted({int(g, 16) for g in HCA.objects.filter(node_id__in=nodes).values_list("port_guid", flat=True)})


def lid_map(lab) -> dict[int, int]:
    cas = (n for n in lab.diags(timeout=20).ibnetdiscover().nodes.values() if not n.is_switch)
    return {n.guid + 1: n.lid for n in cas if n.guid is not None}


def storage(fabric, *tenants) -> FabricPartition:
    access = changes.service_access([t.slug for t in tenants], "lustre")
    members = [f"{g:#018x}" for g in node_guids(fabric, STORAGE_NODE)]
    return changes.set_partition(
        ACTOR, OPERATOR, fabric, name="storage", pkey="0x0042", members=members, service=access
    )


def test_two_tenants_and_their_storage_are_isolated_on_the_wire(su1, tenant_a, tenant_b, client, make_user):
    fabric, lab, pool = su1
    a = book(pool, tenant_a, 16, "a-16")
    b = book(pool, tenant_b, 16, "b-16")
    storage(fabric, tenant_a, tenant_b)
    converge(fabric)
    a.refresh_from_db()
    b.refresh_from_db()
    assert (a.status, b.status) == (S.READY, S.READY)

    lid = lid_map(lab)
    diags = lab.diags(timeout=20)
    hosts_a, hosts_b, store = guids_of(a), guids_of(b), node_guids(fabric, STORAGE_NODE)
    held = set(hosts_a) | set(hosts_b) | set(store)
    free = [g for g in sorted(lid) if g not in held][:4]
    # no PathRecord between the tenants, on any P_Key or none
    for x, y in itertools.product(hosts_a[::5], hosts_b[::5]):
        for pkey in (None, 0x7FFF, a.pkey, b.pkey, 0x0042):
            assert not diags.path(lid[x], lid[y], pkey=pkey).found, (hex(x), hex(y), pkey)
    # paths inside each reservation, and from each tenant's hosts to the storage hosts
    assert diags.path(lid[hosts_a[0]], lid[hosts_a[-1]], pkey=a.pkey).found
    assert diags.path(lid[hosts_b[0]], lid[hosts_b[-1]], pkey=b.pkey).found
    for host in (hosts_a[0], hosts_b[-1]):
        assert diags.path(lid[host], lid[store[0]], pkey=0x0042).found
    # free hosts reach nothing but the SM
    for x, y in itertools.combinations(free, 2):
        assert not diags.path(lid[x], lid[y]).found
    assert not diags.path(lid[free[0]], lid[hosts_a[0]]).found
    assert not diags.path(lid[free[0]], lid[store[0]]).found
    assert diags.pkeys(lid[free[0]]).membership(0x7FFF) == "limited"

    # each tenant's usage guide says which storage its hosts reach, and names no other tenant's host
    member = make_user("alice", Role.TENANT_MEMBER, tenant_a)
    client.force_login(member)
    guide = client.get(f"/api/reservations/{a.pk}/usage-guide/").json()
    assert [s["sentence"] for s in guide["services"]] == [
        f"Your hosts reach {STORAGE_NODE} (lustre) on P_Key 0x0042, as limited members: "
        "other tenants' hosts in it cannot reach yours."
    ]
    page = client.get(f"/reservations/{a.pk}/use/").content.decode()
    assert f"Your hosts reach {STORAGE_NODE} (lustre) on P_Key 0x0042" in page
    b_hosts = set(b.allocations.values_list("node__name", flat=True))
    assert not any(name in page for name in b_hosts)

    audit = run_audit(fabric, seed=1)
    assert audit.error == "" and audit.leaks == [] and audit.findings == [], (audit.leaks, audit.findings)
    assert audit.pairs_checked >= 6 and audit.ports_read >= 8 and audit.default_membership == "limited"
    client.force_login(make_user("op", Role.OPERATOR))
    body = client.get(f"/api/fabrics/{fabric.pk}/isolation/").json()
    assert body["leaks"] == [] and body["default_membership"] == "limited"
    assert body["pairs_checked"] == audit.pairs_checked and body["checked_at"]


def test_a_hand_written_all_full_rule_raises_the_alarm_and_survives_pushes(su1, tenant_a, tenant_b):
    fabric, lab, pool = su1
    book(pool, tenant_a, 16, "a-16")
    book(pool, tenant_b, 16, "b-16")
    converge(fabric)
    audit_fabric(fabric.pk)
    assert not FabricEvent.objects.unresolved().filter(fabric_id=fabric.pk, kind="isolation_leak").exists()
    # an operator shares a key with every host by hand, and tells OpenSM
    live = lab.artefacts.path("partitions.conf")
    live.write_text(live.read_text() + "# scratch space for everyone\nshared=0x0077 : ALL=full ;\n")
    mark = lab.sweep_mark()
    lab.reload()
    wait_for(lambda: lab.swept_since(mark), 30, "OpenSM applying the operator's file")
    # within one audit: a critical alarm naming two tenants' hosts and the key, the rule with its fix
    audit_fabric(fabric.pk)
    event = FabricEvent.objects.unresolved().get(fabric_id=fabric.pk, kind="isolation_leak")
    assert event.severity == "critical" and "0x0077" in event.message, event.message
    audit = as_json(fabric.isolation_audits.first())
    owners = {(leak["a"]["owner"], leak["b"]["owner"]) for leak in audit["leaks"]}
    assert (f"tenant:{tenant_a.pk}", f"tenant:{tenant_b.pk}") in owners | {(b, a) for a, b in owners}
    assert any(f["kind"] == "rule" and f["pkey"] == "0x0077" and "ALL=full" in f["fix"] for f in audit["findings"])
    # the file drifted from what the console wrote: an alarm with the diff, without a change
    assert "+shared=0x0077 : ALL=full ;" in audit["drift"]["partitions.conf"]
    drift = FabricEvent.objects.unresolved().get(fabric_id=fabric.pk, kind="config_drift")
    assert "+shared=0x0077" in drift.detail["diff"]["partitions.conf"]
    # the console adopted it as the operator's, audited, and keeps it through every push
    row = FabricPartition.objects.get(fabric=fabric, pkey=0x0077)
    assert row.source == "operator" and "scratch space" in row.raw
    assert AuditEntry.objects.filter(action="fabric.partition.adopt", object_id=str(row.pk)).exists()
    book(pool, tenant_b, 8, "b-8")
    converge(fabric)
    assert "shared=0x0077 : ALL=full ;" in live.read_text()
    # an operator deletes it in the console: the next push drops it, the next audit is clean
    changes.delete_partition(ACTOR, OPERATOR, fabric, name=row.name)
    converge(fabric)
    assert "0x0077" not in live.read_text() and not FabricPartition.objects.filter(pkey=0x0077, fabric=fabric).exists()
    audit_fabric(fabric.pk)
    event.refresh_from_db()
    drift.refresh_from_db()
    assert event.status == "resolved" and drift.status == "resolved"


def test_an_unplugged_host_of_tenant_a_does_not_stop_tenant_b(su1, tenant_a, tenant_b):
    fabric, lab, pool = su1
    a = book(pool, tenant_a, 16, "a-16")
    converge(fabric)
    a.refresh_from_db()
    assert a.status == S.READY
    # one of A's hosts loses its cables
    node = a.allocations.values_list("node__name", flat=True).first()
    for port in range(1, 9):
        faults.unplug(fabric, node, port)
    b = book(pool, tenant_b, 16, "b-16")
    change = converge(fabric)
    b.refresh_from_db()
    assert b.status == S.READY
    absent = change.outcome["absent_members"]
    assert list(absent) == [f"{a.pkey:#06x}"] and len(absent[f"{a.pkey:#06x}"]) == 8
    apply_audit(fabric.pk)
    event = FabricEvent.objects.unresolved().get(fabric_id=fabric.pk, kind="member_absent")
    assert event.reservations == [a.pk] and list(event.tenants.all()) == [tenant_a]
    a.refresh_from_db()
    assert a.status == S.READY  # still ready on the hosts it has


def test_a_tenants_rogue_sm_rewriting_p_key_tables_is_caught_by_the_audit(su1, tenant_a, tenant_b, tmp_path):
    """ibsim enforces no M_Key, so a tenant's SM (tests/fabric/rogue_sm.py) rewrites the ports'
    P_Key tables in the lab; the console's SM keeps the subnet (sm_key), and the audit reads
    the tables: a critical alarm within one audit."""
    fabric, lab, pool = su1
    a = book(pool, tenant_a, 16, "a-16")
    book(pool, tenant_b, 16, "b-16")
    converge(fabric)
    node = a.allocations.values_list("node__name", flat=True).first()
    host = f"{node} HCA-1"
    with rogue_sm(lab, lab.node_id(host), tmp_path / "rogue") as log:
        wait_for(lambda: logged(log, "non-matching sm_key"), 60, "the rogue meeting the console's SM")
        # (an audit that meets a table mid-rewrite reads "unknown": wait for the rogue's tables)
        wait_for(
            lambda: run_audit(fabric, seed=3).default_membership in ("full", "mixed"), 60, "the rogue's tables read"
        )
    audit = fabric.isolation_audits.first()
    assert audit.default_membership in ("full", "mixed")
    assert any(f["kind"] == "unexpected_key" and f["pkey"] == "0x7fff" for f in audit.findings), audit.findings
    apply_audit(fabric.pk)
    assert FabricEvent.objects.unresolved().get(fabric_id=fabric.pk, kind="isolation_leak").severity == "critical"
