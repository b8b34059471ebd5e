"""Read a node-name map (rdma-core's ``<guid> "<name>"``, also ``S-/H-<guid> name``) and apply it.

The map is the operator's own naming of GUIDs (``ibnetdiscover --node-name-map``, OpenSM's
``node_name_map_name``). Applied to a discovery it replaces the node descriptions, so hosts and
switches get the names the site uses; a host name without an HCA part keeps the HCAs apart by
their order.
"""

from __future__ import annotations

import re

from designer.errors import ParseError
from designer.imports.lines import bounded_lines
from designer.imports.model import Discovery, Finding


class NodeNameMapError(ParseError):
    """The node-name map (not the dump) could not be read; ``line`` is the map's line."""


_GUID = re.compile(r"^(?:0x|[SHR]-)?([0-9a-fA-F]{1,16})$")


def _entry(line: str) -> tuple[str, str] | None:
    """``(guid text, name)`` of a map line (stripped, not a comment), read in one pass:
    ``<guid> "<name>" [# comment]`` or ``<guid> name [# comment]``; None when malformed (an
    unterminated quote, text after the quoted name, a quote inside an unquoted name)."""
    parts = line.split(None, 1)
    guid, rest = parts[0], (parts[1].strip() if len(parts) > 1 else "")
    if rest.startswith('"'):
        end = rest.find('"', 1)
        if end < 0:
            return None
        tail = rest[end + 1 :].strip()
        if tail and not tail.startswith("#"):
            return None
        return guid, rest[1:end].strip()
    name = rest.split("#", 1)[0]
    if '"' in name:
        return None
    return guid, name.strip()


def read_node_name_map(text: str) -> tuple[dict[int, str], list[Finding]]:
    """GUID → name, and a finding for each entry without a name; ParseError names bad GUIDs."""
    names: dict[int, str] = {}
    findings: list[Finding] = []
    try:
        lines = list(bounded_lines(text, "a node-name map"))
    except ParseError as exc:
        raise NodeNameMapError(exc.reason, line=exc.line, text=exc.text) from None
    for lineno, raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        entry = _entry(line)
        guid = _GUID.match(entry[0]) if entry else None
        if entry is None or guid is None:
            raise NodeNameMapError('malformed node-name-map entry: expected <guid> "<name>"', line=lineno, text=raw)
        if not entry[1]:
            findings.append(Finding("map-entry-without-name", entry[0], f"node-name-map line {lineno} has no name"))
            continue
        names[int(guid.group(1), 16)] = entry[1]
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
