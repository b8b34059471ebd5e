"""Two sites, each with its own real lab (ibsim + OpenSM under umad2sim), and a pool spanning both.

    [site-a]  ── ethernet, 2000 µs, 100 Gb/s ──  [site-b]
    fabric A: fat tree, 8 DGX H100 (64 GPUs)     fabric B: fat tree, 4 DGX H100 (32 GPUs)
      [spine-01]                                   [b-spine-01]
      [leaf-01] [leaf-02]  4 nodes under each      [b-leaf-01]  b-node-001..004
      node-001..008

Fabric B is the same kind of design with its names prefixed ``b-`` and its GUIDs moved
(:func:`designer.rebase.rebase`): two subnets never share a GUID. Pools: ``a`` (A's nodes, home
A), ``b`` (B's nodes, home B) and ``both`` (every node, home A).

The labs are started once per test module (``two_lab_processes``, module scope: the processes are
the expensive part, about a second each); the database rows are made for every test
(``two_labs``, function scope) and bound to the running labs, so the fixture works the same in
transactional tests (whose flush would delete module-scoped rows). What a test pushes to a lab
(partitions, unplugged cables) stays for the module's later tests: restore what you break.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from console.fabric.lab.fabrics import start_lab
from console.fabric.lab.manager import Lab
from console.fabric.lab.plan import design_spec, lab_plan
from console.fabric.models import Fabric, Site, SiteLink
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.plan import plan
from designer.rebase import rebase
from designer.serialize import graph_from_dict, graph_to_dict
from designer.services import add_revision, create_design
from scheduling.models import Node, Pool
from scheduling.services import inventory
from tests.fabric.lab_fixtures import with_agent

ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)

#: Site A's design: 2 leaves under a spine, 4 DGX H100 under each leaf.
DESIGN_A = {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100", "levels": 2}
#: Site B's: one leaf (under a spine, so OpenSM routes it with ftree like A), 4 DGX H100.
DESIGN_B = {"topology": "fat-tree", "nodes": 4, "node_type": "DGX-H100", "levels": 2}
#: Site B's names and GUIDs (designer.rebase): ``b-node-001``, GUIDs 0x0002c913….
B_PREFIX, B_GUID_STEP = "b-", 1
#: The link between the sites: ethernet, one-way 2000 µs, 100 Gb/s.
LINK = {"kind": SiteLink.Kind.ETHERNET, "latency_us": 2000.0, "bandwidth_gbps": 100.0}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test using the labs is a lab test (skipped without the lab tools, failed without them
    under CONSOLE_REQUIRE_LAB=1: tests/needs.py), whether or not its module says so."""
    for item in items:
        if {"two_labs", "two_lab_processes"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.lab)


def design_graph(options: dict[str, Any], *, prefix: str = "", step: int = 0) -> dict[str, Any]:
    """The saved (JSON) graph of a design planned from ``options``, rebased when ``step``."""
    result = plan(options, DEFAULT_CATALOGUE)
    assert result.ok and result.graph is not None, result.summary()["errors"]
    data = graph_to_dict(result.graph)
    return rebase(data, step=step, prefix=prefix) if step else data


GRAPH_A = design_graph(DESIGN_A)
GRAPH_B = design_graph(DESIGN_B, prefix=B_PREFIX, step=B_GUID_STEP)


@dataclass(frozen=True)
class TwoLabs:
    """Sites A and B, their link, one fabric (and running lab) per site, pools ``a``, ``b`` and
    ``both`` (every node of both fabrics, home fabric A)."""

    site_a: Site
    site_b: Site
    link: SiteLink
    fabric_a: Fabric
    fabric_b: Fabric
    lab_a: Lab
    lab_b: Lab
    pool_a: Pool
    pool_b: Pool
    pool_both: Pool

    @property
    def sites(self) -> tuple[Site, Site]:
        return self.site_a, self.site_b

    @property
    def fabrics(self) -> tuple[Fabric, Fabric]:
        return self.fabric_a, self.fabric_b

    @property
    def labs(self) -> tuple[Lab, Lab]:
        return self.lab_a, self.lab_b

    @property
    def pools(self) -> tuple[Pool, Pool, Pool]:
        return self.pool_a, self.pool_b, self.pool_both


def _start(graph: dict[str, Any], workdir: Path, socket_name: str) -> Lab:
    spec = design_spec(lab_plan(graph_from_dict(graph, DEFAULT_CATALOGUE)), workdir.resolve(), socket_name)
    return Lab.start(spec)


@pytest.fixture(scope="module")
def two_lab_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Lab, Lab]]:
    """Labs A and B running side by side for the module (own workdirs and ibsim sockets), both
    stopped at teardown whatever happened."""
    root = tmp_path_factory.mktemp("two-labs")
    uid = uuid.uuid4().hex[:6]
    started: list[Lab] = []
    try:
        started.append(_start(GRAPH_A, root / "a", f"t-{uid}-a"))
        started.append(_start(GRAPH_B, root / "b", f"t-{uid}-b"))
        yield started[0], started[1]
    finally:
        for lab in started:
            lab.stop()


def _fabric(site: Site, options: dict[str, Any], graph: dict[str, Any], lab: Lab, name: str) -> Fabric:
    """A lab Fabric bound to ``lab`` (already running) through the lab service, with its inventory."""
    design, revision = create_design(ACTOR, OPERATOR, name=name, options=options)
    if graph != revision.graph:
        revision = add_revision(ACTOR, OPERATOR, design, graph_data=graph, message=f"names and GUIDs of {site}")
    fabric, running = start_lab(revision, name=name, actor=ACTOR, workdir=lab.workdir)
    assert running.workdir == lab.workdir
    Fabric.objects.filter(pk=fabric.pk).update(site=site)
    fabric.refresh_from_db()
    inventory.import_inventory(fabric, actor=ACTOR)
    return fabric


def _pool(fabric: Fabric, name: str, nodes: list[Node]) -> Pool:
    return inventory.create_pool(ACTOR, OPERATOR, fabric=fabric, name=name, kind=Pool.Kind.MANUAL, nodes=nodes)


@pytest.fixture
def two_labs(two_lab_processes: tuple[Lab, Lab], transactional_db: None, lab_console: str) -> Iterator[TwoLabs]:
    """Sites ``site-a`` and ``site-b`` (queues ``site.site-a`` / ``site.site-b``), their link, a
    Fabric per site bound to its running lab (its agent connected: an SM host at each site) with
    nodes, GPUs and HCAs imported, and the pools."""
    lab_a, lab_b = two_lab_processes
    uid = uuid.uuid4().hex[:6]
    site_a = Site.objects.create(name="Site A", slug="site-a", location="hall 1")
    site_b = Site.objects.create(name="Site B", slug="site-b", location="hall 2, across town")
    link = SiteLink.objects.create(a=site_a, b=site_b, **LINK)
    fabric_a = _fabric(site_a, DESIGN_A, GRAPH_A, lab_a, f"fab-a-{uid}")
    fabric_b = _fabric(site_b, DESIGN_B, GRAPH_B, lab_b, f"fab-b-{uid}")
    nodes_a = list(Node.objects.filter(fabric=fabric_a))
    nodes_b = list(Node.objects.filter(fabric=fabric_b))
    with_agent(fabric_a, lab_console)
    with_agent(fabric_b, lab_console)
    yield TwoLabs(
        site_a=site_a,
        site_b=site_b,
        link=link,
        fabric_a=fabric_a,
        fabric_b=fabric_b,
        lab_a=lab_a,
        lab_b=lab_b,
        pool_a=_pool(fabric_a, "a", nodes_a),
        pool_b=_pool(fabric_b, "b", nodes_b),
        pool_both=_pool(fabric_a, "both", nodes_a + nodes_b),
    )
    for lab in (lab_a, lab_b):
        lab.stop_agent()
