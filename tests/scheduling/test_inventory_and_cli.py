"""Inventory bound to the design, pool topologies, the demo seed and ``manage.py schedule``."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from console.tenancy.models import AuditEntry
from designer.plan import plan
from scheduling.models import GPU, HCA, Node, Pool, Reservation
from scheduling.placement import rail_optimized
from scheduling.replay import RESULT_KEYS
from scheduling.services import inventory
from scheduling.services.topology import topology_for_pool, topology_from_graph
from tests.datafiles import TRACES
from tests.scheduling.conftest import give_quota, make_fabric, make_pool


@pytest.mark.smoke
def test_design_graph_gives_the_same_topology_as_the_reference_builder():
    # [8 SUs x 32 DGX H100] --8 rail leaves per SU-- [32 spines]
    named = topology_from_graph(plan({"topology": "rail-optimized", "gpus": 2048}).graph)
    reference = rail_optimized(8)
    topo = named.topology
    assert len(topo.nodes) == 256 and len(topo.groups) == 8
    assert [g.nodes for g in topo.groups] == [g.nodes for g in reference.groups]
    assert topo.spines == reference.spines and len(topo.rail_aligned_nodes) == 256
    assert named.group_names[:2] == ("su01", "su02")


@pytest.mark.django_db
def test_import_is_idempotent_and_binds_ports_to_leaves(fat_tree):
    # the fixture imported once already
    assert Node.objects.filter(fabric=fat_tree).count() == 16
    assert GPU.objects.filter(node__fabric=fat_tree).count() == 128
    hca = HCA.objects.get(node__name="node-001", index=0)
    assert hca.leaf == "leaf-01" and hca.port_guid.startswith("0x") and len(hca.port_guid) == 18
    audits = AuditEntry.objects.count()
    assert inventory.import_inventory(fat_tree).as_dict() == {"nodes": 0, "gpus": 0, "hcas": 0}
    assert AuditEntry.objects.count() == audits


@pytest.mark.django_db
def test_update_guids_from_discovery(fat_tree):
    changed = inventory.update_guids(fat_tree, {"node-001": ["0xAAAA", "bbbb"]})
    assert changed == 2
    assert HCA.objects.get(node__name="node-001", index=0).port_guid == "0x000000000000aaaa"
    from console.tenancy.errors import Invalid

    with pytest.raises(Invalid, match="unknown node"):
        inventory.update_guids(fat_tree, {"node-999": ["0x1"]})
    with pytest.raises(Invalid, match="not a port GUID"):
        inventory.update_guids(fat_tree, {"node-001": ["xyz"]})


@pytest.mark.django_db
def test_pool_topology_has_a_leaf_group_per_leaf_and_rail_optimised_sus(pool):
    topo = topology_for_pool(pool)
    assert len(topo.groups) == 4 and all(len(g.nodes) == 4 for g in topo.groups)
    su = make_fabric("su1", {"topology": "rail-optimized", "gpus": 256})
    su_topo = topology_for_pool(make_pool(su))
    assert len(su_topo.groups) == 1 and len(su_topo.groups[0].leaves) == 8
    assert len(su_topo.rail_aligned_nodes) == 32


def test_pool_topology_cache_is_not_fooled_by_a_recycled_primary_key(fat_tree):
    # SQLite gives a deleted row's key to the next insert; a new pool under that key (same
    # version) must not get the old pool's cached topology.
    nodes = list(Node.objects.filter(fabric=fat_tree).order_by("name"))
    old = make_pool(fat_tree, name="first-half", nodes=nodes[:8])
    assert len(topology_for_pool(old).nodes) == 8
    pk, version = old.pk, old.version
    old.delete()
    recycled = Pool.objects.create(id=pk, fabric=fat_tree, name="all", version=version)
    recycled.nodes.set(nodes)
    recycled = Pool.objects.select_related("fabric").get(pk=pk)
    assert len(topology_for_pool(recycled).nodes) == 16


@pytest.mark.django_db
def test_demo_seed_creates_pool_quotas_and_live_reservations():
    from console.demo import seed_all

    created = seed_all()
    assert any(c.startswith("pool su1") for c in created)
    live = Reservation.objects.live()
    assert {r.tenant.slug for r in live} == {"aurora", "borealis"}
    assert all(r.pkey for r in live)
    # two weeks of history for the usage page: aurora's 64-GPU 12 h pretrain every day alone
    # is 14 × 768 GPU-hours; borealis's 16-GPU all-day serve 14 × 384
    from console.tenancy.models import Principal
    from scheduling.services.usage import UsageQuery, usage_report

    report = usage_report(Principal(None, "operator", None), UsageQuery.checked(None, None))
    hours = {row["name"]: row["gpu_hours"] for row in report.rows}
    assert hours["Aurora Labs"] >= 14 * 768 and hours["Borealis AI"] >= 14 * 384
    assert report.total["preemptions"] >= 1
    # the history was booked when it started: newest-booked first, the live reservations lead
    newest = Reservation.objects.order_by("-created_at")[: live.count()]
    assert {r.pk for r in newest} == {r.pk for r in live}
    assert seed_all() == []


@pytest.mark.smoke
@pytest.mark.django_db  # operators' catalogue overrides are read
def test_replay_cli_prints_the_replay_keys():
    out = StringIO()
    call_command(
        "schedule",
        "replay",
        "--trace",
        str(TRACES / "kalos_jobs.csv"),
        "--format",
        "kalos",
        "--design",
        "rail-optimized:gpus=2048",
        "--policy",
        "first-fit",
        "--max-jobs",
        "40",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert list(result) == list(RESULT_KEYS)
    assert result["jobs"]["submitted"] == 40


@pytest.mark.django_db
def test_replay_cli_accepts_a_saved_design_and_refuses_nonsense(fat_tree):
    out = StringIO()
    call_command(
        "schedule",
        "replay",
        "--trace",
        str(TRACES / "kalos_jobs.csv"),
        "--format",
        "kalos",
        "--design",
        "ft16",
        "--max-jobs",
        "10",
        stdout=out,
    )
    assert "utilization" in out.getvalue()
    with pytest.raises(CommandError, match="no design"):
        call_command(
            "schedule",
            "replay",
            "--trace",
            str(TRACES / "kalos_jobs.csv"),
            "--format",
            "kalos",
            "--design",
            "no-such-design",
        )
    with pytest.raises(CommandError, match="impossible design"):
        call_command(
            "schedule",
            "replay",
            "--trace",
            str(TRACES / "kalos_jobs.csv"),
            "--format",
            "kalos",
            "--design",
            "rail-optimized:gpus=-5",
        )


@pytest.mark.django_db
def test_operator_cli_import_pool_quota_reserve_list_release(tenant_a):
    fabric = make_fabric("cli-ft", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    out = StringIO()
    call_command("schedule", "import-inventory", "--fabric", "cli-ft", stdout=out)
    assert json.loads(out.getvalue()) == {"nodes": 0, "gpus": 0, "hcas": 0}
    call_command("schedule", "pool-create", "--fabric", str(fabric.pk), "--name", "cli", stdout=out)
    call_command("schedule", "quota", "--tenant", "tenant-a", "--pool", "cli", "--guaranteed", "16", stdout=out)
    out = StringIO()
    call_command(
        "schedule",
        "reserve",
        "--tenant",
        "tenant-a",
        "--pool",
        "cli",
        "--gpus",
        "16",
        "--hours",
        "2",
        "--json",
        stdout=out,
    )
    row = json.loads(out.getvalue())
    assert row["status"] == "provisioning" and len(row["nodes"]) == 2
    with pytest.raises(SystemExit):  # over quota: non-zero exit, reason printed
        call_command(
            "schedule",
            "reserve",
            "--tenant",
            "tenant-a",
            "--pool",
            "cli",
            "--gpus",
            "8",
            "--hours",
            "1",
            stdout=StringIO(),
        )
    out = StringIO()
    call_command("schedule", "list", "--tenant", "tenant-a", "--json", stdout=out)
    assert [r["status"] for r in json.loads(out.getvalue())] == ["provisioning", "rejected"]
    out = StringIO()
    call_command("schedule", "release", "--id", str(row["id"]), stdout=out)
    assert "ending" in out.getvalue()


@pytest.mark.django_db
def test_quota_below_usage_is_refused(pool, tenant_a):
    from console.tenancy.errors import Conflict
    from scheduling.services import reservations
    from tests.scheduling.conftest import SYSTEM, request_for, tenant_principal

    give_quota(tenant_a, pool, 32)
    reservations.reserve(SYSTEM, tenant_principal(tenant_a), request_for(pool, gpus=32))
    with pytest.raises(Conflict, match="holds up to 32"):
        give_quota(tenant_a, pool, 16)
