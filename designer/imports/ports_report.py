"""Read ``ibnetdiscover -p`` (the ports report) into the same records as the topology output.

Each connected port is one line, both directions listed::

    CA   134  1 0x7cfe9003003b4bde 4x EDR - SW  1719 10 0x7cfe9003009ce5b0 ( 'o0001 HCA-1' - 'ib-i1l1s01' )

Ports that are up without a peer (``4x ???`` or a speed and only the local description) are
counted, not linked. The report prints port GUIDs and no port counts: nodes are keyed by the GUID
printed and sized by the highest port seen.
"""

from __future__ import annotations

import re

from designer.errors import ParseError
from designer.imports.lines import bounded_lines
from designer.imports.model import AGGREGATION_NODE, Discovery, Finding, IbNode, IbPort
from designer.imports.reader import check_consistency, noise, skip_note

_END = r"(CA|SW|RT)\s+(\S+)\s+(\d+)\s+(\S+)"
_LINKED = re.compile(rf"^{_END}\s+(\d+)x\s*(\S+)\s+-\s+{_END}\s+\((.*)\)\s*$")
_BETWEEN = re.compile(r"'\s+-\s+'")
_UNLINKED = re.compile(rf"^{_END}\s+(\d+)x\s*(\S+)\s+(?:'(.*)'|(.*))$")
_KIND = {"CA": ("Ca", "H"), "SW": ("Switch", "S"), "RT": ("Rt", "R")}


def _descs(inner: str) -> tuple[str, str] | None:
    """The two descriptions of ``'a' - 'b'`` (a linked line's parenthesis): split at the last
    ``' - '`` (a description may hold one), as a greedy pattern would, looking only at the
    quotes from the right instead of backtracking over every split."""
    inner = inner.strip()
    if len(inner) < 2 or inner[0] != "'" or inner[-1] != "'":
        return None
    middle = inner[1:-1]
    pos = middle.rfind("'")
    while pos >= 0:
        found = _BETWEEN.match(middle, pos)
        if found:
            return middle[:pos], middle[found.end() :]
        pos = middle.rfind("'", 0, pos)
    return None


def _guid(text: str, lineno: int, raw: str) -> int:
    if not re.match(r"^0x[0-9a-fA-F]{1,16}$", text):
        raise ParseError(f"malformed GUID {text!r}", line=lineno, text=raw)
    return int(text, 16)


def _lid(text: str, lineno: int, raw: str) -> int:
    if not text.isdigit() or int(text) > 0xFFFF:
        raise ParseError(f"LID {text!r} is not a LID (0-65535)", line=lineno, text=raw)
    return int(text)


def read_ports_report(text: str) -> Discovery:
    """Parse an ``ibnetdiscover -p`` report; ParseError names the line."""
    nodes: dict[str, IbNode] = {}
    skipped: list[int] = []
    unlinked = 0

    def node(kind: str, lid: int, guid: int, desc: str, lineno: int, switch: int | None = None) -> IbNode:
        node_kind, prefix = _KIND[kind]
        desc = desc.strip()
        node_id = f"{prefix}-{guid:016x}"
        if AGGREGATION_NODE in desc and switch is not None:
            # Reports may print one GUID for the Aggregation Nodes of several switches: keep them apart.
            node_id = f"{node_id}@{switch:x}"
        found = nodes.get(node_id)
        if found is None:
            found = nodes[node_id] = IbNode(node_kind, 1, node_id, desc, guid=guid, line=lineno)
            found.lid = lid if node_kind == "Switch" else None
        return found

    for lineno, raw in bounded_lines(text, "a ports report"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINKED.match(line)
        descs = _descs(m.group(11)) if m else None
        if m and descs:
            kind, lid, port, guid, width, speed = m.group(1, 2, 3, 4, 5, 6)
            pkind, plid, pport, pguid = m.group(7, 8, 9, 10)
            g, pg = _guid(guid, lineno, raw), _guid(pguid, lineno, raw)
            here = node(kind, _lid(lid, lineno, raw), g, descs[0], lineno, pg if pkind == "SW" else None)
            there = node(pkind, _lid(plid, lineno, raw), pg, descs[1], lineno, g if kind == "SW" else None)
            if any(p.port == int(port) for p in here.ports):
                continue  # each link is listed from both ends; one of them is enough per port
            entry = IbPort(int(port), there.node_id, int(pport), peer_desc=there.desc, line=lineno)
            entry.width, entry.speed = int(width), speed
            entry.port_guid = here.guid if here.kind == "Ca" else None
            entry.peer_port_guid = there.guid if there.kind == "Ca" else None
            if here.kind == "Ca":
                entry.lid = int(lid)
            here.ports.append(entry)
            here.nports = max(here.nports, int(port))
            continue
        m = _UNLINKED.match(line)
        if m:
            desc = m.group(7) or m.group(8) or ""
            node(m.group(1), _lid(m.group(2), lineno, raw), _guid(m.group(4), lineno, raw), desc, lineno)
            unlinked += 1
            continue
        if noise(line):
            skipped.append(lineno)
            continue
        raise ParseError(
            "unrecognised line in a ports report: expected 'CA|SW lid port guid width speed - …'", line=lineno, text=raw
        )
    if not nodes:
        raise ParseError("no ports found in the ports report")
    _add_reverse_ports(nodes)
    disc = Discovery(list(nodes.values()), source="ports-report")
    if skipped:
        disc.findings.append(skip_note(skipped))
    if unlinked:
        disc.findings.append(
            Finding("port-without-peer", "input", f"{unlinked} port(s) are up without a peer (e.g. '4x ???'): no link")
        )
    check_consistency(disc)
    return disc


def _add_reverse_ports(nodes: dict[str, IbNode]) -> None:
    """A report may list a link from one end only: give the other end its port too."""
    for node in list(nodes.values()):
        for p in list(node.ports):
            peer = nodes[p.peer_id]
            if any(q.port == p.peer_port for q in peer.ports):
                continue
            back = IbPort(p.peer_port, node.node_id, p.port, peer_desc=node.desc, line=p.line)
            back.width, back.speed = p.width, p.speed
            back.port_guid = peer.guid if peer.kind == "Ca" else None
            peer.ports.append(back)
            peer.nports = max(peer.nports, p.peer_port)
