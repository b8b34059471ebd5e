"""Kubernetes topology: node labels, Kueue ``Topology`` and Volcano ``HyperNode`` objects.

All three describe the same tree as the Slurm tree export (``scheduler.node_placement``): hosts
under their block (leaf or scalable unit), blocks under their pod when there are several, and one
root for the fabric. Kueue reads the tree from node labels named by its ``Topology`` levels;
Volcano reads it from ``HyperNode`` objects, tier 1 the blocks (members: nodes) and each tier
above made of the tier below (members: HyperNodes).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict

import yaml

from designer.exports.scheduler import node_placement
from designer.graph import FabricGraph

LABEL_PREFIX = "network.topology"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Kueue's current Topology API (v1beta2 is its storage version; v1beta1 is still served)
KUEUE_API = "kueue.x-k8s.io/v1beta2"
VOLCANO_API = "topology.volcano.sh/v1alpha1"
#: The node labels of the Kueue Topology, broadest first; Kueue wants the hostname lowest.
KUEUE_LEVELS = (f"{LABEL_PREFIX}/spine", f"{LABEL_PREFIX}/block", HOSTNAME_LABEL)


def label_value(value: str) -> str:
    """A Kubernetes label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends."""
    return re.sub(r"[^A-Za-z0-9._]+", "-", value)[:63].strip("-._")


def object_name(name: str) -> str:
    """A DNS-1123 subdomain (cluster object and node names): lower case, [a-z0-9.-]."""
    return re.sub(r"[^a-z0-9.]+", "-", name.lower()).strip("-.")[:253] or "fabric"


def render_k8s_labels(graph: FabricGraph) -> str:
    """Node → labels for topology-aware schedulers (the levels of the Kueue Topology)."""
    labels = {
        object_name(node): {f"{LABEL_PREFIX}/{k}": label_value(v) for k, v in where.items() if label_value(v)}
        for node, where in node_placement(graph).items()
    }
    return json.dumps({"labelPrefix": LABEL_PREFIX, "nodes": labels}, indent=1, sort_keys=True)


def render_kueue_topology(graph: FabricGraph) -> str:
    """A Kueue ``Topology`` naming the label levels of :func:`render_k8s_labels`."""
    doc = {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": object_name(f"infiniband-{graph.meta.get('name') or graph.topology}")},
        "spec": {"levels": [{"nodeLabel": label} for label in KUEUE_LEVELS]},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _hypernode(name: str, tier: int, tier_name: str, kind: str, members: list[str]) -> dict:
    return {
        "apiVersion": VOLCANO_API,
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "tierName": tier_name,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def hypernodes(graph: FabricGraph) -> list[dict]:
    """The HyperNode objects of the fabric, tier 1 (blocks) first."""
    placement = node_placement(graph)
    blocks: dict[str, list[str]] = defaultdict(list)
    pods: dict[str, list[str]] = defaultdict(list)
    for node, where in placement.items():
        blocks[object_name(where["block"])].append(object_name(node))
        pods[object_name(where["spine"])].append(object_name(where["block"]))
    tier_name = "su" if any(n.su >= 0 for n in graph.nodes.values()) else "leaf"
    docs = [_hypernode(b, 1, tier_name, "Node", sorted(m)) for b, m in blocks.items()]
    tops = list(blocks)
    if len(pods) > 1:
        docs += [_hypernode(p, 2, "pod", "HyperNode", sorted(set(m))) for p, m in pods.items()]
        tops = list(pods)
    if len(tops) > 1:
        root = object_name(f"{graph.meta.get('name') or graph.topology}-fabric")
        docs.append(_hypernode(root, docs[-1]["spec"]["tier"] + 1, "fabric", "HyperNode", sorted(tops)))
    return docs


def render_volcano_hypernodes(graph: FabricGraph) -> str:
    """Volcano ``HyperNode`` objects, one YAML document each (``kubectl apply -f``)."""
    return yaml.safe_dump_all(hypernodes(graph), sort_keys=False)
