"""The helper's ops: which MADs a request needs and what their answers say.

Each op takes a ``run`` callable (sync or pipelined, same answers) that sends a batch of
:data:`~console.fabric.diags.mad_wire.Query` and returns the raw attribute data of each (None
where the MAD failed). The reply shapes are documented in :mod:`console.fabric.diags.madworker`.
Standard library only.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from console.fabric.diags.mad_wire import (
    ATTR_LFT,
    ATTR_PKEY_TABLE,
    ATTR_PORT_COUNTERS,
    ATTR_PORT_COUNTERS_EXT,
    ATTR_PORT_INFO,
    ATTR_SL2VL,
    ATTR_VLARB,
    ERROR_FIELDS,
    NODE_TYPES,
    PERF_CLASS,
    PHYS_STATES,
    PORT_STATES,
    READ_ALL,
    READ_DATA,
    READ_ERRORS,
    READ_STATE,
    SM_STATES,
    SMI_CLASS,
    Query,
)

# -- decoding answers (the same for both paths) ------------------------------------------------


def error_counters(data: bytes | None) -> dict[str, int]:
    """The error counters of a PortCounters answer ({} where its MAD failed)."""
    if data is None:
        return {}
    return {name: int.from_bytes(data[offset : offset + size], "big") for name, offset, size in ERROR_FIELDS}


def link_state(data: bytes | None) -> str:
    """The link state of a PortInfo answer ("" where its MAD failed)."""
    return PORT_STATES.get(data[32] & 0x0F, "Unknown") if data is not None else ""


def portinfo(data: bytes | None) -> dict | None:
    """LIDs and states of a PortInfo answer."""
    if data is None:
        return None
    return {
        "lid": struct.unpack_from(">H", data, 16)[0],
        "sm_lid": struct.unpack_from(">H", data, 18)[0],
        "link_state": PORT_STATES.get(data[32] & 0x0F, "Unknown"),
        "phys_state": PHYS_STATES.get(data[33] >> 4, "Unknown"),
    }


def nodeinfo(data: bytes | None) -> dict | None:
    """GUIDs, type, port count and P_Key table size of a NodeInfo answer."""
    if data is None:
        return None
    node_guid, port_guid, cap = struct.unpack_from(">QQH", data, 12)
    return {
        "node_guid": node_guid,
        "port_guid": port_guid,
        "partition_cap": cap,
        "type": NODE_TYPES.get(data[2], "Unknown"),
        "ports": data[3],
        "local_port": data[36],
    }


def sminfo(data: bytes | None) -> dict | None:
    """GUID, activity count, priority and state of an SMInfo answer."""
    if data is None:
        return None
    guid, _key, act = struct.unpack_from(">QQI", data, 0)
    return {
        "guid": guid,
        "act_count": act,
        "priority": data[20] >> 4,
        "state": SM_STATES.get(data[20] & 0x0F, "UNKNOWN"),
    }


# -- the ops -----------------------------------------------------------------------------------

Run = Callable[[Sequence[Query]], list[bytes | None]]


def counters(run: Run, ports: Sequence[Sequence[int]]) -> list[list | None]:
    """``[xmit, rcv, errors, state]`` per ``[lid, port(, mask)]`` (see the module doc)."""
    queries: list[Query] = []
    slots: list[tuple[int, int, int]] = []  # per port: index of its ext, basic, portinfo query
    for p in ports:
        lid, port = int(p[0]), int(p[1])
        mask = int(p[2]) if len(p) > 2 else READ_ALL
        slot = [-1, -1, -1]
        for k, (bit, q) in enumerate(
            (
                (READ_DATA, (PERF_CLASS, lid, ATTR_PORT_COUNTERS_EXT, port)),
                (READ_ERRORS, (PERF_CLASS, lid, ATTR_PORT_COUNTERS, port)),
                (READ_STATE, (SMI_CLASS, lid, ATTR_PORT_INFO, port)),
            )
        ):
            if mask & bit:
                slot[k] = len(queries)
                queries.append(q)
        slots.append((slot[0], slot[1], slot[2]))
    answers = run(queries)
    out: list[list | None] = []
    for ext_i, basic_i, info_i in slots:
        if ext_i >= 0 and answers[ext_i] is None:
            out.append(None)
            continue
        xmit = rcv = None
        if ext_i >= 0:
            xmit, rcv = struct.unpack_from(">QQ", answers[ext_i], 8)  # type: ignore[arg-type]
        errors = error_counters(answers[basic_i]) if basic_i >= 0 else None
        state = link_state(answers[info_i]) if info_i >= 0 else None
        out.append([xmit, rcv, errors, state])
    return out


def lft(run: Run, lid: int, top: int) -> list[int] | None:
    """The switch's linear forwarding table (egress port per LID up to ``top``); None on a failed block."""
    answers = run([(SMI_CLASS, lid, ATTR_LFT, block) for block in range(top // 64 + 1)])
    if any(a is None for a in answers):
        return None
    return [port for a in answers for port in a[:64]][: top + 1]  # type: ignore[index]


def pkeys(run: Run, ports: Sequence[Sequence[int]]) -> list[list[list[int]] | None]:
    """Non-zero entries ``[index, raw]`` of the first ``blocks`` P_Key table blocks (32 keys
    each; block 0 is where OpenSM puts a port's keys) per port; None when any block fails."""
    queries: list[Query] = []
    spans: list[tuple[int, int]] = []
    for p in ports:
        lid, port = int(p[0]), int(p[1])
        blocks = max(1, int(p[2]) if len(p) > 2 else 1)
        spans.append((len(queries), blocks))
        queries += [(SMI_CLASS, lid, ATTR_PKEY_TABLE, ((port & 0xFF) << 16) | b) for b in range(blocks)]
    answers = run(queries)
    out: list[list[list[int]] | None] = []
    for start, blocks in spans:
        got = answers[start : start + blocks]
        if any(a is None for a in got):
            out.append(None)
            continue
        entries: list[list[int]] = []
        for block, data in enumerate(got):
            keys = struct.unpack_from(">32H", data, 0)  # type: ignore[arg-type]
            entries += [[block * 32 + i, raw] for i, raw in enumerate(keys) if raw & 0x7FFF]
        out.append(entries)
    return out


def _sl2vl(data: bytes) -> list[int]:
    """SLtoVLMappingTable (IBA 14.2.5.8): 16 four-bit VLs, SL0 in the high nibble of byte 0."""
    return [v for b in data[:8] for v in (b >> 4, b & 0x0F)]


def _vlarb(data: bytes) -> list[list[int]]:
    """One VLArbitrationTable block (IBA 14.2.5.9): 32 entries of (VL in 4 low bits, weight)."""
    return [[data[2 * i] & 0x0F, data[2 * i + 1]] for i in range(32)]


def qos_tables(run: Run, ports: Sequence[Sequence[int]]) -> list[dict | None]:
    """SL2VL rows and the first block of both VL arbitration tables of each ``[lid, port,
    switch, nports]``: a switch output port is read from every input port 0..nports, a CA port
    once; None when any of its MADs fails."""
    queries: list[Query] = []
    spans: list[tuple[int, list[int]]] = []
    for p in ports:
        lid, port, switch, nports = int(p[0]), int(p[1]), bool(p[2]), int(p[3])
        inputs = list(range(nports + 1)) if switch else [0]
        spans.append((len(queries), inputs))
        queries += [(SMI_CLASS, lid, ATTR_SL2VL, ((i & 0xFF) << 8) | (port & 0xFF) if switch else 0) for i in inputs]
        arb_port = port if switch else 0
        queries += [(SMI_CLASS, lid, ATTR_VLARB, (block << 16) | arb_port) for block in (1, 3)]  # low, high
    answers = run(queries)
    out: list[dict | None] = []
    for start, inputs in spans:
        got = answers[start : start + len(inputs) + 2]
        if any(a is None for a in got):
            out.append(None)
            continue
        rows = {str(i): _sl2vl(a) for i, a in zip(inputs, got, strict=False)}  # type: ignore[arg-type]
        out.append({"sl2vl": rows, "low": _vlarb(got[-2]), "high": _vlarb(got[-1])})  # type: ignore[arg-type]
    return out
