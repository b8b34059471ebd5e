"""Builder shared by every generator: planned GUIDs, names and fast record creation."""

from __future__ import annotations

from typing import TypedDict, Unpack

from designer.catalogue import Catalogue, NodeType
from designer.graph import FabricGraph, Link, Node, Switch, planned_ca_guid, planned_switch_guid
from designer.options import ResolvedOptions


def width(count: int, minimum: int = 2) -> int:
    """Zero-padding width so names sort naturally (node-0001 … node-2048)."""
    return max(minimum, len(str(count)))


class SwitchPlace(TypedDict, total=False):
    """Where a generated switch sits in its topology (the optional fields of `Switch`)."""

    su: int
    pod: int
    index: int
    coords: tuple[int, ...]


class Builder:
    """Creates records directly (no per-edit checks): validation runs on the result."""

    def __init__(self, ro: ResolvedOptions, catalogue: Catalogue, topology: str) -> None:
        self.ro = ro
        self.graph = FabricGraph(catalogue, topology)
        self.switch_model = ro.switch.name
        self.split = ro.options.split or None
        self._switches = 0
        self._nodes = 0
        self.links = self.graph.links

    def switch(self, name: str, tier: str, **attrs: Unpack[SwitchPlace]) -> str:
        guid = planned_switch_guid(self._switches)
        self._switches += 1
        self.graph.switches[name] = Switch(name, self.switch_model, tier, guid, split=self.split, **attrs)
        return name

    def node(
        self, name: str, node_type: NodeType, *, su: int = -1, gpus: int | None = None, hcas: int | None = None
    ) -> Node:
        index = self._nodes
        self._nodes += 1
        count = node_type.hcas if hcas is None else hcas
        ca = tuple(planned_ca_guid(index, h) for h in range(count))
        node = Node(
            name,
            node_type.name,
            ca,
            tuple(g + 1 for g in ca),
            (1,) * count,
            tuple(range(count)),
            su,
            role=node_type.role,
            gpus=node_type.gpus if gpus is None else gpus,
        )
        self.graph.nodes[name] = node
        return node

    def link(self, a: str, a_port: int, b: str, b_port: int, tier: str) -> None:
        self.links.append(Link(a, a_port, b, b_port, tier))
