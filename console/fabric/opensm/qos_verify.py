"""Verify QoS on the ports: read SL2VL and VLArbitration tables back and compare with what was rendered.

OpenSM programs the ``qos_*`` options of ``opensm.conf`` into every port (IBA 7.6.6 SL-to-VL
mapping, 7.6.9 VL arbitration). This module reads them back with ``smpquery sl2vl`` and
``smpquery vlarb`` on every HCA port and every cabled switch port (switch port 0 is skipped: a
base switch port 0 has no VL arbitration and OpenSM leaves its SL2VL alone) and reports each
difference. ibsim implements both attributes, so the lab verifies what OpenSM really programmed.

Not verified: ``VLHighLimit`` (PortInfo). ibsim 0.10's PortInfo Set ignores that field (it always
reads 0), so comparing it in the lab could only fail; docs/operations.md says so.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from console.fabric.diags.mad import MadError, MadSession
from console.fabric.diags.runner import DiagError, DiagRunner
from console.fabric.diags.topology import Topology
from console.fabric.opensm.qos import QosOptions

_SL2VL_ROW = re.compile(r"^(?:ports:\s*in\s+(?P<inp>\d+),\s*out\s+(?P<outp>\d+))?\s*:?\s*(?P<cells>\|.*\|)\s*$")
_HEX_CELLS = re.compile(r"\|\s*(0x[0-9a-fA-F]+|\d+)\s*")


@dataclass(frozen=True)
class VlArb:
    """A port's VL arbitration tables as read back: (VL, weight) entries up to the port's caps."""

    low: tuple[tuple[int, int], ...]
    high: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class PortRef:
    """One port to read: ``name[port]`` for people, LID and port number for the SMPs."""

    name: str
    lid: int
    port: int
    switch: bool
    nports: int = 0  # a switch's port count: its SL2VL is read from every input port 0..nports

    @property
    def label(self) -> str:
        """``leaf1[3]`` / ``hca01[1]``."""
        return f"{self.name}[{self.port}]"


def parse_sl2vl(text: str) -> dict[int, tuple[int, ...]]:
    """``smpquery sl2vl`` output → input port → the 16 VLs of SL0..SL15 (CA ports: input port 0)."""
    rows: dict[int, tuple[int, ...]] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _SL2VL_ROW.match(line.strip())
        if not m:
            continue
        cells = [c.strip() for c in m["cells"].strip("|").split("|")]
        if len(cells) != 16 or not all(c.isdigit() for c in cells):
            continue
        rows[int(m["inp"] or 0)] = tuple(int(c) for c in cells)
    return rows


def _row(line: str) -> list[int]:
    return [int(v, 0) for v in _HEX_CELLS.findall(line)]


def parse_vlarb(text: str) -> VlArb | None:
    """``smpquery vlarb`` output → the low and high tables; None for "No VLArbitration tables"."""
    if "No VLArbitration tables" in text:
        return None
    tables: dict[str, list[tuple[int, int]]] = {"low": [], "high": []}
    current: str | None = None
    vls: list[int] = []
    for line in text.splitlines():
        lowered = line.lower()
        if lowered.startswith("# low priority"):
            current = "low"
        elif lowered.startswith("# high priority"):
            current = "high"
        elif current and line.startswith("VL"):
            vls = _row(line.split(":", 1)[1])
        elif current and line.startswith("WEIGHT"):
            weights = _row(line.split(":", 1)[1])
            tables[current].extend(zip(vls, weights, strict=False))
    return VlArb(tuple(tables["low"]), tuple(tables["high"]))


def expected_table(template: Sequence[tuple[int, int]], read_len: int) -> tuple[tuple[int, int], ...]:
    """What a port shows for ``template`` in a table of ``read_len`` entries: OpenSM writes the
    template from entry 0 and zeroes the rest (VL 0 weight 0 = entry unused)."""
    padded = list(template)[:read_len] + [(0, 0)] * max(0, read_len - len(template))
    return tuple(padded)


def compare_port(
    port: PortRef, sl2vl: dict[int, tuple[int, ...]], vlarb: VlArb | None, options: QosOptions
) -> list[str]:
    """Differences between one port's tables and the rendered options (empty = verified)."""
    problems = []
    want = tuple(options.sl2vl)
    if not sl2vl:
        problems.append(f"{port.label}: no SL2VL table read back")
    for in_port, row in sorted(sl2vl.items()):
        if row != want:
            where = f" (in {in_port})" if port.switch else ""
            problems.append(f"{port.label}{where}: SL2VL {list(row)} ≠ rendered {list(want)}")
    if vlarb is None:
        problems.append(f"{port.label}: no VL arbitration tables read back")
        return problems
    for name, got, template in (("low", vlarb.low, options.vlarb_low), ("high", vlarb.high, options.vlarb_high)):
        want_table = expected_table(template, len(got))
        if got != want_table:
            problems.append(f"{port.label}: VLArb {name} {list(got)} ≠ rendered {list(want_table)}")
    return problems


def ports_to_check(topology: Topology) -> list[PortRef]:
    """Every HCA port and every cabled switch port (port 0 excluded) that has a LID to address."""
    ports = []
    for link in topology.links:
        for node_id, port in ((link.a_id, link.a_port), (link.b_id, link.b_port)):
            node = topology.nodes.get(node_id)
            if node is None or node.lid is None or port == 0:
                continue
            ports.append(PortRef(node.name, node.lid, port, node.is_switch, node.nports if node.is_switch else 0))
    return sorted(set(ports), key=lambda p: (not p.switch, p.name, p.port))


def read_port(diags: DiagRunner, port: PortRef) -> tuple[dict[int, tuple[int, ...]], VlArb | None]:
    """Read one port's SL2VL (switches: every input port towards this output port) and VLArb."""
    args = [str(port.lid), str(port.port)] if port.switch else [str(port.lid)]
    sl2vl = parse_sl2vl(diags.run("smpquery", "sl2vl", *args).stdout)
    vlarb = parse_vlarb(diags.run("smpquery", "vlarb", *args).stdout)
    return sl2vl, vlarb


def read_mad(
    mad: MadSession, ports: Sequence[PortRef], *, timeout: float
) -> list[tuple[dict[int, tuple[int, ...]], VlArb | None] | None]:
    """Every port's tables in one MAD-helper request (None where a MAD failed)."""
    answers = mad.qos_tables([(p.lid, p.port, p.switch, p.nports) for p in ports], timeout=timeout)
    out: list[tuple[dict[int, tuple[int, ...]], VlArb | None] | None] = []
    for answer in answers:
        if answer is None:
            out.append(None)
            continue
        rows = {int(i): tuple(int(v) for v in row) for i, row in answer["sl2vl"].items()}
        low = tuple((int(vl), int(w)) for vl, w in answer["low"])
        high = tuple((int(vl), int(w)) for vl, w in answer["high"])
        out.append((rows, VlArb(low, high)))
    return out


def verify_qos_tables(
    diags: DiagRunner,
    ports: Sequence[PortRef],
    options: QosOptions,
    *,
    workers: int = 4,
    read: Callable[[DiagRunner, PortRef], tuple[dict[int, tuple[int, ...]], VlArb | None]] = read_port,
    mad: MadSession | None = None,
    mad_timeout: float = 60.0,
    used: list[str] | None = None,
) -> list[str]:
    """Read every port in ``ports`` and return all differences from ``options`` (empty = verified).

    With ``mad`` the tables are read in one pipelined MAD-helper request; a helper that cannot
    start or fails the request leaves the reads to ``smpquery`` processes. ``used`` collects
    which reader answered (for the step log)."""
    used = used if used is not None else []
    if mad is not None:
        try:
            tables = read_mad(mad, ports, timeout=mad_timeout)
        except MadError as exc:
            used.append(f"MAD helper failed ({exc}): smpquery")
        else:
            used.append("MAD helper")
            problems: list[str] = []
            for port, got in zip(ports, tables, strict=True):
                if got is None:
                    problems.append(f"{port.label}: no SL2VL/VLArb answer")
                else:
                    problems += compare_port(port, got[0], got[1], options)
            return problems

    def check(port: PortRef) -> list[str]:
        try:
            sl2vl, vlarb = read(diags, port)
        except DiagError as exc:
            return [f"{port.label}: {exc}"]
        return compare_port(port, sl2vl, vlarb, options)

    if mad is None:
        used.append("smpquery")
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(check, ports))
    return [problem for problems in results for problem in problems]
