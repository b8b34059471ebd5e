"""Read a node-name map (rdma-core's ``<guid> "<name>"``, also ``S-/H-<guid> name``) and apply it.

The map is the operator's own naming of GUIDs (``ibnetdiscover --node-name-map``, OpenSM's
``node_name_map_name``). Applied to a discovery it replaces the node descriptions, so hosts and
switches get the names the site uses; a host name without an HCA part keeps the HCAs apart by
their order.
"""

from __future__ import annotations

import re

from designer.errors import ParseError
from designer.imports.model import Discovery, Finding


class NodeNameMapError(ParseError):
    """The node-name map (not the dump) could not be read; ``line`` is the map's line."""


_ENTRY = re.compile(r'^(\S+)(?:\s+(?:"([^"]*)"|([^#"]*?)))?\s*(?:#.*)?$')
_GUID = re.compile(r"^(?:0x|[SHR]-)?([0-9a-fA-F]{1,16})$")


def read_node_name_map(text: str) -> tuple[dict[int, str], list[Finding]]:
    """GUID → name, and a finding for each entry without a name; ParseError names bad GUIDs."""
    names: dict[int, str] = {}
    findings: list[Finding] = []
    for lineno, raw in enumerate(text.lstrip("\ufeff").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _ENTRY.match(line)
        guid = _GUID.match(m.group(1)) if m else None
        if m is None or guid is None:
            raise NodeNameMapError('malformed node-name-map entry: expected <guid> "<name>"', line=lineno, text=raw)
        name = (m.group(2) if m.group(2) is not None else m.group(3) or "").strip()
        if not name:
            findings.append(Finding("map-entry-without-name", m.group(1), f"node-name-map line {lineno} has no name"))
            continue
        names[int(guid.group(1), 16)] = name
    return names, findings


def apply_node_name_map(disc: Discovery, names: dict[int, str]) -> int:
    """Rename the discovered nodes the map names (by node GUID, else port GUID); returns how many."""
    renamed = 0
    for node in disc.nodes:
        name = names.get(node.guid) if node.guid is not None else None
        if name is None:
            name = next((names[p.port_guid] for p in node.ports if p.port_guid in names), None)
        if name is not None and not node.aggregation_node:
            node.desc = name
            renamed += 1
    by_id = disc.by_id()
    for node in disc.nodes:
        for p in node.ports:
            peer = by_id.get(p.peer_id)
            if peer is not None:
                p.peer_desc = peer.desc
    return renamed
