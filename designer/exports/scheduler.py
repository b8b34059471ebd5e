"""Scheduler topology: Slurm tree and block topology (Kubernetes: ``designer.exports.kubernetes``)."""

from __future__ import annotations

import re
from collections import defaultdict

import yaml

from designer.graph import FabricGraph
from designer.hostlist import compress

#: Longest Kubernetes label value; switch names become label values, so none is longer.
MAX_NAME = 63


def scheduler_names(graph: FabricGraph) -> dict[str, str]:
    """Switch name → a name Slurm and Kubernetes accept, unique within the graph.

    Discovered switches are named after their node description ("Voltaire 4036 - 36 QDR ports
    switch"): a space would end a topology.conf field and is not allowed in a label value. Runs of
    other characters become "-"; a clash or an over-long name gets the switch GUID appended.
    """
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in sorted(graph.switches):
        safe = re.sub(r"[^A-Za-z0-9._]+", "-", name).strip("-._") or "switch"
        if safe in taken or len(safe) > MAX_NAME:
            suffix = f"-{graph.switches[name].guid:016x}"
            safe = safe[: MAX_NAME - len(suffix)].rstrip("-._") + suffix
        taken.add(safe)
        out[name] = safe
    return out


def node_placement(graph: FabricGraph) -> dict[str, dict[str, str]]:
    """Compute node → {block, spine, leaf, rack}: the groups schedulers pack jobs into.

    block: the scalable unit (rail-optimised) or the node's leaf; spine: the pod (3 levels) or
    dragonfly+ group, else the whole fabric; leaf: the switch of the node's first HCA.
    """
    first_leaf: dict[str, tuple[int, str]] = {}
    nodes = graph.nodes
    for lk in graph.links:
        for dev, port, other in ((lk.a, lk.a_port, lk.b), (lk.b, lk.b_port, lk.a)):
            if dev in nodes and other in graph.switches:
                best = first_leaf.get(dev)
                if best is None or port < best[0]:
                    first_leaf[dev] = (port, other)
    sus = max((n.su for n in nodes.values()), default=-1) + 1
    su_width = max(2, len(str(sus)))
    pods = max((s.pod for s in graph.switches.values()), default=-1) + 1
    pod_width = max(2, len(str(pods)))
    pod_prefix = "g" if graph.topology == "dragonfly-plus" else "pod"
    safe = scheduler_names(graph)
    out: dict[str, dict[str, str]] = {}
    for node in nodes.values():
        if node.role != "compute":
            continue
        leaf = first_leaf.get(node.name, (0, ""))[1]
        sw = graph.switches.get(leaf)
        block = f"su{node.su + 1:0{su_width}d}" if node.su >= 0 else safe.get(leaf) or "unconnected"
        spine = f"{pod_prefix}{sw.pod + 1:0{pod_width}d}" if sw is not None and sw.pod >= 0 else "fabric"
        out[node.name] = {"block": block, "spine": spine, "leaf": safe.get(leaf, ""), "rack": node.rack}
    return out


def _groups(placement: dict[str, dict[str, str]], key: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for node, where in placement.items():
        groups[where[key]].append(node)
    return groups


def render_slurm_tree(graph: FabricGraph) -> str:
    """topology.conf for topology/tree: blocks under pods under one fabric switch."""
    placement = node_placement(graph)
    blocks = _groups(placement, "block")
    lines = [
        f"# Slurm topology/tree for the planned {graph.topology} fabric",
        "# rail-optimised SUs appear as one switch each (their rail leaves act together)",
    ]
    for block, members in blocks.items():
        lines.append(f"SwitchName={block} Nodes={compress(members)}")
    pods: dict[str, list[str]] = defaultdict(list)
    for block, members in blocks.items():
        pods[placement[members[0]]["spine"]].append(block)
    if len(blocks) > 1:
        if len(pods) > 1:
            for pod, members in pods.items():
                lines.append(f"SwitchName={pod} Switches={compress(members)}")
            lines.append(f"SwitchName=fabric Switches={compress(list(pods))}")
        else:
            lines.append(f"SwitchName=fabric Switches={compress(list(blocks))}")
    return "\n".join(lines) + "\n"


def block_sizes(blocks: dict[str, list[str]]) -> list[int]:
    """The base block size, then its doublings up to the node count.

    topology.conf(5): "each block must have at least the planning base block size count of
    nodes", so the base is the smallest block (a part-filled last leaf), not the largest.
    """
    base = min((len(v) for v in blocks.values()), default=1)
    total = sum(len(v) for v in blocks.values())
    sizes = [base]
    while sizes[-1] * 2 <= total:
        sizes.append(sizes[-1] * 2)
    return sizes


def render_slurm_block(graph: FabricGraph) -> str:
    """topology.conf for topology/block: one block per SU (or leaf)."""
    blocks = _groups(node_placement(graph), "block")
    lines = [f"# Slurm topology/block for the planned {graph.topology} fabric"]
    lines.extend(f"BlockName={b} Nodes={compress(m)}" for b, m in blocks.items())
    lines.append("BlockSizes=" + ",".join(map(str, block_sizes(blocks))))
    return "\n".join(lines) + "\n"


def render_slurm_yaml(graph: FabricGraph) -> str:
    """topology.yaml (Slurm 25.05+) with the tree as default and the blocks as an option."""
    placement = node_placement(graph)
    blocks = _groups(placement, "block")
    switches = [{"switch": b, "nodes": compress(m)} for b, m in blocks.items()]
    pods: dict[str, list[str]] = defaultdict(list)
    for block, members in blocks.items():
        pods[placement[members[0]]["spine"]].append(block)
    if len(pods) > 1:
        switches += [{"switch": p, "children": compress(m)} for p, m in pods.items()]
        switches.append({"switch": "fabric", "children": compress(list(pods))})
    elif len(blocks) > 1:
        switches.append({"switch": "fabric", "children": compress(list(blocks))})
    doc = [
        {"topology": "tree", "cluster_default": True, "tree": {"switches": switches}},
        {
            "topology": "block",
            "cluster_default": False,
            "block": {
                "block_sizes": block_sizes(blocks),
                "blocks": [{"block": b, "nodes": compress(m)} for b, m in blocks.items()],
            },
        },
    ]
    return yaml.safe_dump(doc, sort_keys=False)
