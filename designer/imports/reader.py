"""Read ibnetdiscover text: plain and ``-g`` grouped output, ibsim net files, and what people paste.

A UTF-8 BOM, shell prompts and the error lines ibnetdiscover prints on stderr (captured with
``2>&1``) are skipped with one finding naming the line numbers. Everything else that is not
ibnetdiscover output is refused with the line number and its text (ParseError), as are empty or
negative LIDs and malformed GUIDs. ``ibnetdiscover -p`` ports reports are recognised and read by
:mod:`designer.imports.ports_report`.
"""

from __future__ import annotations

import re

from designer.errors import ParseError
from designer.imports.lines import MAX_LINE, bounded_lines
from designer.imports.model import Discovery, Finding, IbNode, IbPort

_HEADER = re.compile(r'^(Switch|Ca|Hca|Rt)\s+(\d+)\s+"([^"]+)"\s*(?:#\s*(.*))?$')
_PORT = re.compile(
    r"^\[(\d+)\](?:\[ext (\d+)\])?(?:\(([^)]*)\))?\s*"
    r'"([^"]+)"\[(\d+)\](?:\[ext \d+\])?(?:\(([^)]*)\))?\s*'
    # ibsim net files may set a link's width, speed or extended speed after its peer: 'w=1 s=4'
    r"(?:[wse]=\d+\s*)*(?:#\s*(.*))?$"
)
_ASSIGN = re.compile(r"^(vendid|devid|sysimgguid|switchguid|caguid|rtguid|hcaguids?)\s*=\s*(.*)$")
_VALUE = re.compile(r"^(0x[0-9a-fA-F]{1,16}|\d{1,20})(?:\(([0-9a-fA-F]{1,16})\))?$")
_HEX_GUID = re.compile(r"^[0-9a-fA-F]{1,16}$")
_DESC = re.compile(r'^"([^"]*)"\s*(.*)$')
_LID = re.compile(r"\blid\b(?:\s+(\S+))?")
_LMC = re.compile(r"\blmc (\d+)")
_RATE = re.compile(r"\b(\d+)x([A-Z]+\d*)\b")
_ID_GUID = re.compile(r"^[SHR]-([0-9A-Za-z]{16})$")
_SLOT_LINE = re.compile(r"^(?:\S+\s+)?(?:Line|Spine|SRBD|Slot)?\s*\d+ Chip \d+$")
_GROUPING = ("Non-Chassis Nodes", "Chassis")
_IGNORED = ("include", "do ", "module", "width", "speed", "pdebug", "ext ")
#: Shell prompts (``[root@ufm01 ~]# ibnetdiscover``, ``user@host:~$ …``, ``$ ibnetdiscover``).
_PROMPT = re.compile(r"^(?:\[[^\]\s]+@[^\]]+\]\s*[#$>]|[\w.-]+@[\w.-]+(?::\S*)?\s*[#$>]\s|[$>]\s+\S)")
#: What ibnetdiscover and libibmad print on stderr.
_STDERR = re.compile(
    r"^(?:ib(?:warn|error|panic|debug)\b|[\w./-]+\.c:\d+[;:]|\S*ibnetdiscover(?:\[\d+\])?:\s|"
    r"(?:Warning|Error|ERROR|WARNING)\b.*\b(?:umad|smp|mad|port|timed out)\b)"
)
_PORTS_REPORT = re.compile(r"^(CA|SW|RT)\s+\d+\s+\d+\s+0x[0-9a-fA-F]+\s")
_KIND = {"Switch": "Switch", "Ca": "Ca", "Hca": "Ca", "Rt": "Rt"}


def _guid_value(text: str, lineno: int, raw: str) -> tuple[int, int | None]:
    m = _VALUE.match(text.strip())
    if not m:
        raise ParseError(f"malformed GUID or number {text.strip()!r}", line=lineno, text=raw)
    value = m.group(1)
    number = int(value, 16) if value.lower().startswith("0x") else int(value)
    if number >= 1 << 64:
        raise ParseError(f"malformed GUID {text.strip()!r}: more than 64 bits", line=lineno, text=raw)
    return number, int(m.group(2), 16) if m.group(2) else None


def _port_guid(text: str | None, lineno: int, raw: str) -> int | None:
    if text is None:
        return None
    if not _HEX_GUID.match(text):
        raise ParseError(f"malformed port GUID ({text}): expected up to 16 hex digits", line=lineno, text=raw)
    return int(text, 16)


def _check_id(node_id: str, lineno: int, raw: str) -> None:
    m = _ID_GUID.match(node_id)
    if m and not _HEX_GUID.match(m.group(1)):
        raise ParseError(f"malformed GUID in node id {node_id!r}", line=lineno, text=raw)


def _guid_from_id(node_id: str) -> int | None:
    m = re.match(r"^[SHR]-([0-9a-fA-F]{1,16})$", node_id)
    return int(m.group(1), 16) if m else None


def _lids(text: str, lineno: int, raw: str) -> list[int]:
    """Every LID in a comment (outside quoted descriptions); empty or negative LIDs are refused."""
    out = []
    for m in _LID.finditer(text):
        token = m.group(1) or ""
        if not token.isdigit() or int(token) > 0xFFFF:
            shown = token or "nothing"
            raise ParseError(f"LID {shown!r} is not a LID (0-65535)", line=lineno, text=raw)
        out.append(int(token))
    return out


def _parse_comment(comment: str, port: IbPort, is_ca: bool, lineno: int, raw: str) -> None:
    head, _, rest = comment.partition('"')
    desc, quoted, tail = rest.partition('"')
    if quoted:
        port.peer_desc = desc
    else:
        tail = ""
    own = _lids(head, lineno, raw)
    if is_ca and own:
        port.lid = own[0]
        lmc = _LMC.search(head)
        if lmc:
            port.lmc = int(lmc.group(1))
    peer = _lids(tail, lineno, raw) if quoted else ([] if is_ca else own)
    if peer:
        port.peer_lid = peer[0]
    m = _RATE.search(tail if quoted else head)
    if m:
        port.width, port.speed = int(m.group(1)), m.group(2)


def is_ports_report(text: str) -> bool:
    """True when the text is an ``ibnetdiscover -p`` ports report."""
    for raw in text.lstrip("\ufeff").splitlines():
        line = raw.strip()[:MAX_LINE]  # (only its start is looked at: the reader refuses a longer line)
        if not line or line.startswith("#") or _PROMPT.match(line) or _STDERR.match(line):
            continue
        return bool(_PORTS_REPORT.match(line))
    return False


def skip_note(skipped: list[int]) -> Finding:
    """The one finding that names the lines a reader skipped."""
    shown = ", ".join(str(n) for n in skipped[:20]) + (f" and {len(skipped) - 20} more" if len(skipped) > 20 else "")
    return Finding(
        "skipped-lines",
        "input",
        f"skipped {len(skipped)} line(s) that are not ibnetdiscover output "
        f"(shell prompt or error messages): line(s) {shown}",
        skipped[0],
    )


def noise(line: str) -> bool:
    """A shell prompt or a captured stderr line."""
    return bool(_PROMPT.match(line) or _STDERR.match(line))


def read_topology(text: str) -> Discovery:
    """Parse ibnetdiscover (or ibsim net file) text; ParseError names the line."""
    nodes: list[IbNode] = []
    pending: dict[str, tuple[int, int | None]] = {}
    current: IbNode | None = None
    ids: dict[str, int] = {}
    skipped: list[int] = []
    slot = ""
    for lineno, raw in bounded_lines(text, "ibnetdiscover's output"):
        line = raw.strip()
        if not line:
            current = None
            continue
        if line.startswith("#"):
            continue
        if line.startswith("[") and not _PROMPT.match(line):
            if current is None:
                raise ParseError("port line outside a Switch/Ca record", line=lineno, text=raw)
            current.ports.append(_port_line(current, line, lineno, raw))
            continue
        m = _ASSIGN.match(line)
        if m:
            pending[m.group(1)] = _guid_value(m.group(2), lineno, raw)
            current = None
            continue
        m = _HEADER.match(line)
        if m:
            current = _header(m, pending, lineno, raw, ids)
            current.slot, slot, pending = slot, "", {}
            nodes.append(current)
            continue
        if _SLOT_LINE.match(line):
            slot, current = line, None
            continue
        if line.startswith(_GROUPING) or line.startswith(_IGNORED):
            current = None
            continue
        if noise(line):
            skipped.append(lineno)
            continue
        raise ParseError(
            "unrecognised line: expected a Switch/Ca header, a [port] line, key=value or comment",
            line=lineno,
            text=raw,
        )
    if not nodes:
        raise ParseError("no Switch or Ca records found")
    disc = Discovery(nodes)
    if skipped:
        disc.findings.append(skip_note(skipped))
    check_consistency(disc)
    return disc


def _port_line(node: IbNode, line: str, lineno: int, raw: str) -> IbPort:
    m = _PORT.match(line)
    if not m:
        raise ParseError('malformed port line: expected [port](guid) "peer-id"[peer-port] # …', line=lineno, text=raw)
    _check_id(m.group(4), lineno, raw)
    port = IbPort(int(m.group(1)), m.group(4), int(m.group(5)), line=lineno)
    if m.group(2):
        port.ext_port = int(m.group(2))
    port.port_guid = _port_guid(m.group(3), lineno, raw)
    port.peer_port_guid = _port_guid(m.group(6), lineno, raw)
    if not 0 <= port.port <= node.nports or port.peer_port < 0:
        raise ParseError(f"port {port.port} outside 1..{node.nports} of {node.node_id}", line=lineno, text=raw)
    _parse_comment(m.group(7) or "", port, node.kind != "Switch", lineno, raw)
    if any(p.port == port.port for p in node.ports):
        raise ParseError(f"port {port.port} of {node.node_id} listed twice", line=lineno, text=raw)
    return port


def _header(
    m: re.Match[str], pending: dict[str, tuple[int, int | None]], lineno: int, raw: str, ids: dict[str, int]
) -> IbNode:
    kind = _KIND[m.group(1)]
    node = IbNode(kind, int(m.group(2)), m.group(3), line=lineno)
    if node.nports <= 0:
        raise ParseError("a node needs at least one port", line=lineno, text=raw)
    _check_id(node.node_id, lineno, raw)
    if node.node_id in ids:
        raise ParseError(f"{node.node_id} already defined on line {ids[node.node_id]}", line=lineno, text=raw)
    ids[node.node_id] = lineno
    comment = m.group(4) or ""
    d = _DESC.match(comment)
    node.desc, rest = (d.group(1), d.group(2)) if d else (comment, "")
    if rest:
        node.enhanced_port0 = "enhanced port 0" in rest
        lids = _lids(rest, lineno, raw)
        lmc = _LMC.search(rest)
        node.lid = lids[0] if lids else None
        node.lmc = int(lmc.group(1)) if lmc else None
    # The node GUID is the header's and the parenthesised one; on a director's ASIC the value
    # before the parentheses is the chassis' system image GUID, shared by all its ASICs.
    guid_key = {"Switch": "switchguid", "Ca": "caguid", "Rt": "rtguid"}[kind]
    first, paren = pending.get(guid_key, (None, None))
    if first is None and kind == "Ca" and "hcaguids" in pending:
        first = pending["hcaguids"][0]
    node.guid = _guid_from_id(node.node_id)
    if node.guid is None:
        node.guid = paren if paren is not None else first
    node.port_guid = paren
    node.vendid = pending.get("vendid", (None, None))[0]
    node.devid = pending.get("devid", (None, None))[0]
    node.sysimgguid = pending.get("sysimgguid", (None, None))[0]
    if node.sysimgguid is None and first is not None and first != node.guid:
        node.sysimgguid = first
    return node


def check_consistency(disc: Discovery) -> None:
    """Both ends of a link must name each other; dangling ends and unlinked HCAs become findings."""
    by_id = disc.by_id()
    for node in disc.nodes:
        for p in node.ports:
            peer = by_id.get(p.peer_id)
            if peer is None:
                disc.findings.append(
                    Finding(
                        "peer-not-in-dump",
                        f"{node.node_id}[{p.port}]",
                        f"{node.desc or node.node_id} port {p.port} leads to {p.peer_id}, which the dump does not "
                        "describe: that link is left out",
                        p.line,
                    )
                )
                continue
            back = next((q for q in peer.ports if q.port == p.peer_port), None)
            if back is not None and (back.peer_id, back.peer_port) != (node.node_id, p.port):
                raise ParseError(
                    f"{node.node_id}[{p.port}] points to {p.peer_id}[{p.peer_port}], which "
                    f"points to {back.peer_id}[{back.peer_port}]",
                    line=p.line,
                )
        if node.kind == "Ca" and not node.ports:
            disc.findings.append(
                Finding(
                    "unlinked-hca",
                    node.desc or node.node_id,
                    f"HCA {node.desc or node.node_id} ({node.node_id}) reports no link: not imported",
                    node.line,
                )
            )
