"""Parsers of infiniband-diags output (version 44) into typed dataclasses.

Each parser takes the tool's stdout as text. Formats were captured from the lab (OpenSM 3.3.23
on ibsim 0.10); samples live in ``tests/fabric/fixtures/diags/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FULL_MEMBER_BIT = 0x8000


class DiagParseError(ValueError):
    """The output did not look like what the tool prints."""


@dataclass(frozen=True)
class PkeyEntry:
    """One non-empty slot of a port's P_Key table."""

    index: int
    raw: int

    @property
    def pkey(self) -> int:
        """The 15-bit partition key."""
        return self.raw & 0x7FFF

    @property
    def full(self) -> bool:
        """True for full membership (top bit set), False for limited."""
        return bool(self.raw & FULL_MEMBER_BIT)


@dataclass(frozen=True)
class PkeyTable:
    """``smpquery pkeys`` of one port."""

    entries: tuple[PkeyEntry, ...]
    capacity: int | None

    def membership(self, pkey: int) -> str | None:
        """``full``, ``limited``, ``both`` or None when ``pkey`` (15-bit) is absent."""
        found = {e.full for e in self.entries if e.pkey == pkey & 0x7FFF}
        if not found:
            return None
        if found == {True, False}:
            return "both"
        return "full" if True in found else "limited"

    def pkeys(self) -> dict[int, str]:
        """Every key present → membership."""
        return {e.pkey: self.membership(e.pkey) or "" for e in self.entries}

    def indexes(self) -> dict[int, int]:
        """Every key present → its (first) index in the table: what ``NCCL_IB_PKEY`` names."""
        out: dict[int, int] = {}
        for e in sorted(self.entries, key=lambda e: e.index):
            out.setdefault(e.pkey, e.index)
        return out


def parse_pkeys(text: str) -> PkeyTable:
    """Parse ``smpquery pkeys <lid> [port]``: ``   0: 0xffff 0x8003 ...`` rows + capacity line."""
    entries = []
    capacity = None
    seen_row = False
    for line in text.splitlines():
        m = re.match(r"^\s*(\d+):\s+((?:0x[0-9a-fA-F]{4}\s*)+)$", line)
        if m:
            seen_row = True
            base = int(m[1])
            for i, word in enumerate(m[2].split()):
                raw = int(word, 16)
                if raw & 0x7FFF:
                    entries.append(PkeyEntry(base + i, raw))
            continue
        m = re.match(r"^(\d+) pkeys capacity for this port", line.strip())
        if m:
            capacity = int(m[1])
    if not seen_row:
        raise DiagParseError("no P_Key table rows in smpquery output")
    return PkeyTable(tuple(entries), capacity)


SM_STATES = {0: "NOTACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}


@dataclass(frozen=True)
class SmInfo:
    """``sminfo``: which SM is master and in what state."""

    lid: int
    guid: int
    activity_count: int
    priority: int
    state: str

    @property
    def is_master(self) -> bool:
        """True when the queried SM is the subnet's master."""
        return self.state == "MASTER"


def parse_sminfo(text: str) -> SmInfo:
    """Parse ``sminfo: sm lid 1 sm guid 0x..., activity count 429 priority 0 state 3 SMINFO_MASTER``."""
    m = re.search(
        r"sm lid (\d+) sm guid (0x[0-9a-fA-F]+), activity count (\d+) priority (\d+) state (\d+)",
        text,
    )
    if not m:
        raise DiagParseError(f"unexpected sminfo output: {text.strip()[:200]!r}")
    return SmInfo(
        lid=int(m[1]),
        guid=int(m[2], 16),
        activity_count=int(m[3]),
        priority=int(m[4]),
        state=SM_STATES.get(int(m[5]), f"UNKNOWN({m[5]})"),
    )


def _dotted_fields(text: str) -> dict[str, str]:
    """``Name:.......value`` lines (portinfo, perfquery) → dict (first occurrence wins)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_]+):\.*(.*)$", line.strip())
        if m:
            out.setdefault(m[1], m[2].strip())
    return out


@dataclass(frozen=True)
class PortInfo:
    """Link state, speed and width of one port (``smpquery portinfo`` / ``ibportstate``)."""

    lid: int | None
    link_state: str
    phys_state: str
    width_active: str
    speed_active: str
    speed_ext_active: str
    fields: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_active(self) -> bool:
        """True when the logical link state is Active."""
        return self.link_state == "Active"

    @property
    def is_down(self) -> bool:
        """True when the logical link is Down (cable out, port disabled)."""
        return self.link_state == "Down"

    @property
    def speed(self) -> str:
        """Extended speed (e.g. ``53.125 Gbps``) when present, else the classic one."""
        ext = self.speed_ext_active
        if ext and ext not in ("0", "No Extended Speed"):
            return ext
        return self.speed_active


def parse_portinfo(text: str) -> PortInfo:
    """Parse ``smpquery portinfo`` (and the local part of ``ibportstate ... query``)."""
    f = _dotted_fields(text)
    if "LinkState" not in f:
        raise DiagParseError("no LinkState in port info output")
    lid = f.get("Lid")
    return PortInfo(
        lid=int(lid, 0) if lid and lid.isdigit() else None,
        link_state=f["LinkState"],
        phys_state=f.get("PhysLinkState", ""),
        width_active=f.get("LinkWidthActive", ""),
        speed_active=f.get("LinkSpeedActive", ""),
        speed_ext_active=f.get("LinkSpeedExtActive", ""),
        fields=f,
    )


@dataclass(frozen=True)
class PortCounters:
    """``perfquery [-x]`` counters of one port (every numeric field, by its tool name)."""

    lid: int | None
    port: int | None
    counters: dict[str, int]

    def __getitem__(self, name: str) -> int:
        return self.counters[name]


def parse_perfquery(text: str) -> PortCounters:
    """Parse ``perfquery`` / ``perfquery -x`` output."""
    m = re.search(r"counters: Lid (\d+) port (\d+)", text)
    counters = {}
    for name, value in _dotted_fields(text).items():
        try:
            counters[name] = int(value, 0)
        except ValueError:
            continue
    if not counters:
        raise DiagParseError("no counters in perfquery output")
    return PortCounters(int(m[1]) if m else None, int(m[2]) if m else None, counters)


@dataclass(frozen=True)
class PathRecord:
    """The fields of one SA PathRecord that the console looks at."""

    sgid: str
    dgid: str
    slid: int
    dlid: int
    pkey: int
    sl: int
    mtu: int
    rate: int


@dataclass(frozen=True)
class PathQuery:
    """``saquery -p``: the path records the SA returned (none = no path)."""

    records: tuple[PathRecord, ...]

    @property
    def found(self) -> bool:
        """True when the SA returned at least one usable path."""
        return bool(self.records)


def parse_path_records(text: str) -> PathQuery:
    """Parse ``saquery -p`` output; records with DLID 0 (padding the tool prints) are dropped."""
    records = []
    for block in text.split("PathRecord dump:")[1:]:
        f: dict[str, str] = {}
        for line in block.splitlines():
            m = re.match(r"^\s*([a-z_0-9]+)\.+(.*)$", line)
            if m:
                f[m[1]] = m[2].strip()
        try:
            rec = PathRecord(
                sgid=f["sgid"],
                dgid=f["dgid"],
                slid=int(f["slid"], 0),
                dlid=int(f["dlid"], 0),
                pkey=int(f["pkey"], 16),
                sl=int(f["sl"], 0),
                mtu=int(f["mtu"], 16),
                rate=int(f["rate"], 16),
            )
        except (KeyError, ValueError) as exc:
            raise DiagParseError(f"malformed PathRecord: {exc}") from exc
        if rec.dlid and rec.slid:
            records.append(rec)
    return PathQuery(tuple(records))


@dataclass(frozen=True)
class NodeRecord:
    """An SA NodeRecord: one port of one node, with its LID."""

    lid: int
    node_type: str
    node_guid: int
    port_guid: int
    port_num: int
    num_ports: int
    description: str


def parse_node_records(text: str) -> list[NodeRecord]:
    """Parse ``saquery NR`` output."""
    out = []
    for block in text.split("NodeRecord dump:")[1:]:
        f: dict[str, str] = {}
        for line in block.splitlines():
            m = re.match(r"^\s*([A-Za-z_0-9]+)\.+(.*)$", line)
            if m:
                f[m[1]] = m[2].strip()
        try:
            out.append(
                NodeRecord(
                    lid=int(f["lid"], 0),
                    node_type=f["node_type"],
                    node_guid=int(f["node_guid"], 16),
                    port_guid=int(f["port_guid"], 16),
                    port_num=int(f["port_num"], 0),
                    num_ports=int(f["num_ports"], 0),
                    description=f.get("NodeDescription", ""),
                )
            )
        except (KeyError, ValueError) as exc:
            raise DiagParseError(f"malformed NodeRecord: {exc}") from exc
    return out
