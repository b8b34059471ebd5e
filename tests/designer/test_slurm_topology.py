"""The Slurm exports as Slurm reads them: topology.conf (tree) loaded by a real slurmctld, and the
block file held to the grammar of topology.conf(5), which Slurm 22.05 (Debian 12) predates.

The expectations come from the design graph itself: which compute hosts are cabled to which leaf,
and which leaves share spines (a pod). The exporter's output is only ever the thing under test.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest

from designer.builtin_catalogue import default_catalogue
from designer.exports import export
from designer.graph import FabricGraph
from designer.imports import import_fabric
from designer.plan import plan
from tests.designer.sample_designs import DISCOVERED, REALDATA, THREE_LEVEL, TWO_LEVEL
from tests.needs import needs
from tests.slurmctld import Slurmctld

pytestmark = needs("slurm")

MAN = REALDATA / "slurm_k8s_topology" / "slurm_man_topology.conf.5"
#: a three-level fat tree in one pod whose last leaf is not full (96 = 4 x 20 + 16)
UNEVEN = {**THREE_LEVEL, "nodes": 96}


@pytest.fixture(scope="module")
def slurmctld(tmp_path_factory):
    ctld = Slurmctld(tmp_path_factory.mktemp("slurmctld"))
    yield ctld
    ctld.stop()


def design(options: dict | Path) -> FabricGraph:
    if isinstance(options, Path):
        if not options.exists():
            pytest.skip(f"{options} is not on this machine")
        return import_fabric(options.read_text(), default_catalogue()).graph
    result = plan(options)
    assert result.ok, result.errors
    assert result.graph is not None
    return result.graph


def expected_tree(graph: FabricGraph) -> tuple[dict[str, set[str]], list[set[str]]]:
    """(leaf → its compute hosts, the pods as sets of leaves) from the cables of the design."""
    hosts: dict[str, set[str]] = defaultdict(set)
    uplinks: dict[str, set[str]] = defaultdict(set)
    tiers = {name: sw.tier for name, sw in graph.switches.items()}
    for lk in graph.links:
        for low, high in ((lk.a, lk.b), (lk.b, lk.a)):
            if low in graph.nodes and graph.nodes[low].role == "compute" and tiers.get(high) == "leaf":
                hosts[high].add(low)
            if tiers.get(low) == "leaf" and tiers.get(high) == "spine":
                uplinks[low].add(high)
    # leaves that share a spine are in one pod: connected components of the leaf-spine graph
    pods: list[set[str]] = []
    for leaf in sorted(hosts):
        joined = [pod for pod in pods if any(uplinks[leaf] & uplinks[other] for other in pod)]
        merged = {leaf}.union(*joined)
        pods = [pod for pod in pods if pod not in joined] + [merged]
    return dict(hosts), pods


def show_topology(ctld: Slurmctld) -> dict[str, dict[str, str]]:
    """``scontrol show topology``: switch name → its fields (Level, Nodes, Switches)."""
    out: dict[str, dict[str, str]] = {}
    for line in ctld.scontrol("show", "topology").splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        if "SwitchName" in fields:
            out[fields.pop("SwitchName")] = fields
    return out


@pytest.mark.parametrize(
    "options", [TWO_LEVEL, THREE_LEVEL, DISCOVERED], ids=["two-level", "three-level", "discovered"]
)
def test_slurmctld_loads_the_tree_export(slurmctld, options):
    # given a design and the controller started with its hosts and its exported topology.conf
    graph = design(options)
    leaves, pods = expected_tree(graph)
    hosts = sorted(set().union(*leaves.values()))
    slurmctld.start(hosts, export(graph, "slurm-topology")[0])

    # when Slurm is asked what it loaded
    loaded = show_topology(slurmctld)

    # then every leaf of the design is a level-0 switch with exactly the hosts cabled to it
    level0 = {name: f for name, f in loaded.items() if f["Level"] == "0"}
    named = {frozenset(slurmctld.hostnames(f["Nodes"])): name for name, f in level0.items()}
    assert set(named) == {frozenset(cabled) for cabled in leaves.values()}
    assert not any("Switches" in f for f in level0.values())
    for leaf, cabled in leaves.items():
        if " " in leaf:  # a discovered switch named by its description: Slurm gets it without spaces
            assert named[frozenset(cabled)].startswith(leaf.split()[0])
        else:
            assert named[frozenset(cabled)] == leaf
    # above them one switch per pod (when there are several), then a single root over everything
    top = max(int(f["Level"]) for f in loaded.values())
    roots = [name for name, f in loaded.items() if int(f["Level"]) == top]
    assert len(roots) == 1
    assert slurmctld.hostnames(loaded[roots[0]]["Nodes"]) == set(hosts)
    if len(pods) > 1:
        assert top == 2
        middle = {name: f for name, f in loaded.items() if f["Level"] == "1"}
        assert sorted(sorted(slurmctld.hostnames(f["Switches"])) for f in middle.values()) == sorted(
            sorted(named[frozenset(leaves[leaf])] for leaf in pod) for pod in pods
        )
        assert slurmctld.hostnames(loaded[roots[0]]["Switches"]) == set(middle)
    else:
        assert top == 1
        assert slurmctld.hostnames(loaded[roots[0]]["Switches"]) == set(level0)
    # and Slurm complained about none of it
    assert not [line for line in slurmctld.output().splitlines() if "error" in line and "topology" in line.lower()]


def test_the_three_level_design_really_has_two_pods():
    # guards the parametrisation above: without two pods the middle level would go untested
    assert len(expected_tree(design(THREE_LEVEL))[1]) == 2


def block_grammar_errors(text: str, hosts: set[str], expand) -> list[str]:
    """What topology.conf(5)'s topology/block section forbids in ``text``.

    BlockName: unique, required; Nodes: the block's nodes; BlockSizes: the planning base size
    first, "each block must have at least the planning base block size count of nodes", and
    "successive BlockSizes must be a power of two larger than the prior values".
    """
    errors: list[str] = []
    blocks: dict[str, set[str]] = {}
    sizes: list[int] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = dict(part.split("=", 1) for part in line.split())
        if set(fields) == {"BlockSizes"}:
            sizes = [int(s) for s in fields["BlockSizes"].split(",")]
        elif set(fields) == {"BlockName", "Nodes"}:
            if fields["BlockName"] in blocks:
                errors.append(f"BlockName {fields['BlockName']} twice")
            blocks[fields["BlockName"]] = expand(fields["Nodes"])
        else:
            errors.append(f"not topology/block grammar: {line}")
    if not sizes:
        errors.append("no BlockSizes")
    for smaller, larger in zip(sizes, sizes[1:], strict=False):
        ratio = larger / smaller
        if larger <= smaller or ratio != int(ratio) or int(ratio) & (int(ratio) - 1):
            errors.append(f"BlockSizes {larger} is not a power of two times {smaller}")
    errors += [
        f"{name} has {len(m)} nodes, fewer than the base {sizes[0]}"
        for name, m in blocks.items()
        if sizes and len(m) < sizes[0]
    ]
    seen: list[str] = [n for m in blocks.values() for n in m]
    if len(seen) != len(set(seen)):
        errors.append("a node is in two blocks")
    if set(seen) != hosts:
        errors.append(f"blocks cover {len(set(seen))} nodes, the design has {len(hosts)}")
    if sizes and sizes[-1] > len(hosts):
        errors.append(f"largest BlockSizes {sizes[-1]} exceeds the {len(hosts)} nodes")
    return errors


def test_block_grammar_is_the_man_pages(slurmctld):
    # the man page's own example passes, and a base size larger than a block is caught
    page = MAN.read_text()
    assert "Each block must have at least the planning base block size count of nodes." in page
    example = "BlockName=block1 Nodes=n[1-32]\nBlockName=block2 Nodes=n[33-64]\nBlockSizes=30,60\n"
    hosts = {f"n{i}" for i in range(1, 65)}
    assert block_grammar_errors(example, hosts, slurmctld.hostnames) == []
    assert block_grammar_errors(example.replace("30,60", "40"), hosts, slurmctld.hostnames) != []
    assert block_grammar_errors(example.replace("30,60", "30,45"), hosts, slurmctld.hostnames) != []


@pytest.mark.parametrize("options", [TWO_LEVEL, THREE_LEVEL, UNEVEN], ids=["two-level", "three-level", "uneven"])
def test_block_export_follows_the_documented_grammar(slurmctld, options):
    graph = design(options)
    hosts = {name for name, node in graph.nodes.items() if node.role == "compute"}
    assert block_grammar_errors(export(graph, "slurm-block")[0], hosts, slurmctld.hostnames) == []
