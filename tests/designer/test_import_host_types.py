"""Imported hosts get their GPUs from the operator's host types (``PATTERN NODE_TYPE`` lines):
ibnetdiscover sees HCAs, not GPUs. Checked through the import, the API and the inventory the
scheduler pools, against counts read here from the dump's own lines."""

from __future__ import annotations

import re

import pytest

from console.fabric.models import Fabric
from designer.builtin_catalogue import default_catalogue
from designer.exports import export
from designer.imports import import_fabric
from designer.imports.host_types import MAX_LINE, HostTypesError
from designer.models import DesignRevision
from designer.plan import plan
from designer.services import revision_graph
from scheduling.models import GPU, Node
from scheduling.services.inventory import import_inventory

ONE_SU = {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"}


@pytest.fixture(scope="module")
def dump() -> str:
    """A 1-SU fabric as ibnetdiscover prints it (32 hosts named su01-n01 … su01-n32)."""
    return export(plan(ONE_SU).graph, "ibnetdiscover")[0]


def hosts_in(text: str) -> set[str]:
    """Host names from the dump's CA lines (``Ca … "…" # "su01-n05 HCA-3"``), read independently."""
    return {m.group(1) for m in re.finditer(r'^Ca\s.*#\s*"(\S+)\s', text, re.M)}


def test_matched_hosts_come_in_with_their_servers_gpus_and_the_rest_with_none(dump):
    hosts = hosts_in(dump)
    assert len(hosts) == 32
    rules = "# the first ten are DGX H100\nsu01-n0[0-9]  DGX-H100\nsu01-n10 DGX-H100   # and this one\n"
    graph = import_fabric(dump, default_catalogue(), host_types=rules).graph
    typed = {h for h in hosts if re.fullmatch(r"su01-n0\d|su01-n10", h)}
    assert len(typed) == 10
    gpus = default_catalogue().nodes["DGX-H100"].gpus
    assert {n.name: n.gpus for n in graph.nodes.values()} == {h: gpus if h in typed else 0 for h in hosts}
    assert {graph.nodes[h].node_type for h in typed} == {"DGX-H100"}
    untyped = import_fabric(dump, default_catalogue()).graph
    assert sum(n.gpus for n in untyped.nodes.values()) == 0  # what an import gave before


@pytest.mark.parametrize(
    ("rules", "why"),
    [
        ("su01-* DGX-H999\n", "line 1: no node type 'DGX-H999'"),
        ("\nsu01-*\n", "line 2: expected 'PATTERN NODE_TYPE'"),
        ("a b c\n", "line 1: expected"),
        ("x" * (MAX_LINE + 1) + " DGX-H100\n", f"at most {MAX_LINE} characters"),
    ],
)
def test_a_bad_line_is_refused_with_its_number(dump, rules, why):
    with pytest.raises(HostTypesError, match=re.escape(why)):
        import_fabric(dump, default_catalogue(), host_types=rules)


@pytest.mark.django_db
def test_through_the_api_the_inventory_the_scheduler_pools_has_the_gpus(dump, operator, client_for):
    api = client_for(operator)
    body = {"name": "brownfield", "text": dump, "host_types": "su01-n* DGX-H100\n"}
    imported = api.post("/api/designs/import/", body, format="json")
    assert imported.status_code == 201, imported.content
    revision = DesignRevision.objects.get(design_id=imported.json()["id"], number=1)
    fabric = Fabric.objects.create(name="prod-ib", driver="agent", revision=revision)
    import_inventory(fabric)
    assert Node.objects.filter(fabric=fabric).count() == 32
    assert GPU.objects.filter(node__fabric=fabric).count() == 32 * 8
    assert set(Node.objects.filter(fabric=fabric).values_list("gpu_model", flat=True)) == {"H100"}
    bad = api.post("/api/designs/import/", {**body, "name": "bad", "host_types": "su01-n*\n"}, format="json")
    assert bad.status_code == 400 and "host_types" in str(bad.json())


@pytest.mark.django_db
def test_the_cli_takes_a_host_types_file(dump, tmp_path):
    import io
    import json

    from django.core.management import call_command

    (tmp_path / "fabric.txt").write_text(dump)
    (tmp_path / "types").write_text("su01-n1* DGX-H100\n")
    out = io.StringIO()
    call_command(
        "design", "import", "--file", str(tmp_path / "fabric.txt"), "--host-types", str(tmp_path / "types"),
        "--name", "cli-typed", "--json", stdout=out,
    )  # fmt: skip
    body = json.loads(out.getvalue())
    graph = revision_graph(DesignRevision.objects.get(design_id=body["design_id"], number=1))
    assert sum(n.gpus for n in graph.nodes.values()) == 10 * 8  # su01-n10 … su01-n19
