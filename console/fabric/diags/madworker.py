"""A long-lived MAD helper: counters, port states, P_Key tables and forwarding tables via libibmad.

Why: one diag process (``perfquery``, ``smpquery``) per port or switch costs ~40-80 ms of start-up
and ibsim attach. One process that opens its umad port once and issues MADs in a loop answers
~10,000 MADs/s against ibsim: a telemetry sweep of the 2,048-GPU lab (12,288 PMA queries) in
~0.3 s, the P_Key tables of a push's 136 checked ports in ~15 ms. It runs with the same
environment as the diags (``LD_PRELOAD`` of umad2sim, ``SIM_HOST``, ``IBSIM_SOCKNAME`` in the
lab; nothing on a real host), so it must be its own process. The client is
:class:`console.fabric.diags.mad.MadSession`.

Protocol: one JSON request per stdin line, one JSON reply per stdout line; the first line the
helper writes is ``{"ok": true, "ready": true}`` (or ``{"ok": false, "error": ...}``)::

    {"op": "ping"}                                    → {"ok": true, "data": "pong"}
    {"op": "counters", "ports": [[lid, port], ...]}   → {"ok": true, "data": [[x, r, errs, state]...]}
    {"op": "lft", "lid": 12, "top": 300}              → {"ok": true, "data": [port per lid...]}
    {"op": "pkeys", "ports": [[lid, port(, blocks)], ...]} → {"ok": true, "data": [[[index, raw]...]...]}
    {"op": "portinfo", "ports": [[lid, port], ...]}   → {"ok": true, "data": [{"lid":..}...]}
    {"op": "nodeinfo", "lids": [lid, ...]}            → {"ok": true, "data": [{"port_guid":..}...]}
    {"op": "sminfo", "lid": 1}                        → {"ok": true, "data": {"act_count": ...}}

Per-port answers are ``null`` where the MAD failed (timeout, no such LID). ``pkeys`` is
SubnGet(P_KeyTable) of block 0 (the first 32 keys, where OpenSM puts them) or of the first
``blocks`` blocks (``smpquery pkeys`` reads PartitionCap/32 blocks, NodeInfo ``partition_cap``
gives it) and returns the non-zero entries as ``[index, raw]`` — the top bit of ``raw`` is full
membership. The attribute modifier is ``port << 16 | block`` as smpquery sends it; on an HCA
the port is its CA port (the one owning the LID).

Standard library only (no Django): ``python -m console.fabric.diags.madworker``.
"""

from __future__ import annotations

import ctypes
import json
import struct
import sys

PERF_CLASS, SMI_CLASS = 0x04, 0x01
ATTR_PORT_COUNTERS, ATTR_PORT_COUNTERS_EXT = 0x12, 0x1D
ATTR_NODE_INFO, ATTR_PORT_INFO, ATTR_PKEY_TABLE = 0x11, 0x15, 0x16
ATTR_LFT, ATTR_SM_INFO = 0x19, 0x20
NODE_TYPES = {1: "CA", 2: "Switch", 3: "Router"}
QP1_QKEY = 0x80010000
PORT_STATES = {1: "Down", 2: "Initialize", 3: "Armed", 4: "Active"}
PHYS_STATES = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
               5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest"}  # fmt: skip
SM_STATES = {0: "NOTACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}
ERROR_FIELDS = (  # (name, offset, size) in the PortCounters attribute
    ("SymbolErrorCounter", 4, 2),
    ("LinkDownedCounter", 7, 1),
    ("PortRcvErrors", 8, 2),
    ("PortXmitDiscards", 14, 2),
)


class _DrPath(ctypes.Structure):
    _fields_ = [("cnt", ctypes.c_int), ("p", ctypes.c_uint8 * 64),
                ("drslid", ctypes.c_uint16), ("drdlid", ctypes.c_uint16)]  # fmt: skip


class _PortId(ctypes.Structure):  # libibmad's ib_portid_t
    _fields_ = [("lid", ctypes.c_int), ("drpath", _DrPath), ("grh_present", ctypes.c_int),
                ("gid", ctypes.c_uint8 * 16), ("qp", ctypes.c_uint32), ("qkey", ctypes.c_uint32),
                ("sl", ctypes.c_uint8), ("pkey_idx", ctypes.c_uint)]  # fmt: skip


class Mad:
    """libibmad through ctypes: PMA and LID-routed SMP queries with a per-query timeout (ms)."""

    def __init__(self, timeout_ms: int = 200) -> None:
        lib = ctypes.CDLL("libibmad.so.5")
        lib.mad_rpc_open_port.restype = ctypes.c_void_p
        lib.mad_rpc_open_port.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                          ctypes.POINTER(ctypes.c_int), ctypes.c_int]  # fmt: skip
        for fn in (lib.pma_query_via, lib.smp_query_via):
            fn.restype = ctypes.c_void_p
        lib.pma_query_via.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                      ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]  # fmt: skip
        lib.smp_query_via.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                      ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p]  # fmt: skip
        classes = (ctypes.c_int * 2)(SMI_CLASS, PERF_CLASS)
        self.port = lib.mad_rpc_open_port(None, 0, classes, 2)
        if not self.port:
            raise OSError("mad_rpc_open_port failed")
        self.lib = lib
        self.timeout = timeout_ms
        self.buf = ctypes.create_string_buffer(1024)
        self.pid = _PortId()

    def _portid(self, lid: int, qp: int) -> ctypes.c_void_p:
        ctypes.memset(ctypes.byref(self.pid), 0, ctypes.sizeof(self.pid))
        self.pid.lid = lid
        if qp:
            self.pid.qp, self.pid.qkey = qp, QP1_QKEY
        return ctypes.byref(self.pid)

    def pma(self, lid: int, port: int, attr: int) -> bytes | None:
        ok = self.lib.pma_query_via(self.buf, self._portid(lid, 1), port, self.timeout, attr,
                                    self.port)  # fmt: skip
        return self.buf.raw[:64] if ok else None

    def smp(self, lid: int, attr: int, mod: int) -> bytes | None:
        ok = self.lib.smp_query_via(self.buf, self._portid(lid, 0), attr, mod, self.timeout,
                                    self.port)  # fmt: skip
        return self.buf.raw[:64] if ok else None

    def counters(self, lid: int, port: int) -> list | None:
        ext = self.pma(lid, port, ATTR_PORT_COUNTERS_EXT)
        if ext is None:
            return None
        xmit, rcv = struct.unpack_from(">QQ", ext, 8)
        basic = self.pma(lid, port, ATTR_PORT_COUNTERS)
        errors = {}
        if basic is not None:
            for name, offset, size in ERROR_FIELDS:
                errors[name] = int.from_bytes(basic[offset : offset + size], "big")
        info = self.smp(lid, ATTR_PORT_INFO, port)
        state = PORT_STATES.get(info[32] & 0x0F, "Unknown") if info is not None else ""
        return [xmit, rcv, errors, state]

    def lft(self, lid: int, top: int) -> list[int] | None:
        out: list[int] = []
        for block in range(top // 64 + 1):
            data = self.smp(lid, ATTR_LFT, block)
            if data is None:
                return None
            out.extend(data[:64])
        return out[: top + 1]

    def pkeys(self, lid: int, port: int, blocks: int = 1) -> list[list[int]] | None:
        """Non-zero entries ``[index, raw]`` of the first ``blocks`` P_Key table blocks (32 keys
        each; block 0 is where OpenSM puts a port's keys). None when any block fails."""
        out: list[list[int]] = []
        for block in range(max(1, blocks)):
            data = self.smp(lid, ATTR_PKEY_TABLE, ((port & 0xFF) << 16) | block)
            if data is None:
                return None
            keys = struct.unpack_from(">32H", data, 0)
            out += [[block * 32 + i, raw] for i, raw in enumerate(keys) if raw & 0x7FFF]
        return out

    def portinfo(self, lid: int, port: int) -> dict | None:
        """The PortInfo fields the console uses (LID, logical and physical state)."""
        data = self.smp(lid, ATTR_PORT_INFO, port)
        if data is None:
            return None
        return {
            "lid": struct.unpack_from(">H", data, 16)[0],
            "sm_lid": struct.unpack_from(">H", data, 18)[0],
            "link_state": PORT_STATES.get(data[32] & 0x0F, "Unknown"),
            "phys_state": PHYS_STATES.get(data[33] >> 4, "Unknown"),
        }

    def nodeinfo(self, lid: int) -> dict | None:
        """NodeInfo through ``lid``: node and port GUID (the port that owns the LID), type."""
        data = self.smp(lid, ATTR_NODE_INFO, 0)
        if data is None:
            return None
        node_guid, port_guid, cap = struct.unpack_from(">QQH", data, 12)
        return {"node_guid": node_guid, "port_guid": port_guid, "partition_cap": cap,
                "type": NODE_TYPES.get(data[2], "Unknown"), "ports": data[3],
                "local_port": data[36]}  # fmt: skip

    def sminfo(self, lid: int) -> dict | None:
        """SMInfo of the SM at ``lid``: GUID, ActCount (OpenSM: MADs it sent), priority, state."""
        data = self.smp(lid, ATTR_SM_INFO, 0)
        if data is None:
            return None
        guid, _key, act = struct.unpack_from(">QQI", data, 0)
        return {"guid": guid, "act_count": act, "priority": data[20] >> 4,
                "state": SM_STATES.get(data[20] & 0x0F, "UNKNOWN")}  # fmt: skip


def _ports(req: dict) -> list[tuple[int, int]]:
    return [(int(lid), int(port)) for lid, port in req["ports"]]


def answer(mad: Mad, req: dict) -> object:
    """The data of one request (raises ValueError/KeyError/TypeError on a bad one)."""
    op = req["op"]
    if op == "ping":
        return "pong"
    if op == "counters":
        return [mad.counters(lid, port) for lid, port in _ports(req)]
    if op == "lft":
        return mad.lft(int(req["lid"]), int(req["top"]))
    if op == "pkeys":  # ports: [lid, port] or [lid, port, blocks]
        return [mad.pkeys(int(p[0]), int(p[1]), int(p[2]) if len(p) > 2 else 1)
                for p in req["ports"]]  # fmt: skip
    if op == "portinfo":
        return [mad.portinfo(lid, port) for lid, port in _ports(req)]
    if op == "nodeinfo":
        return [mad.nodeinfo(int(lid)) for lid in req["lids"]]
    if op == "sminfo":
        return mad.sminfo(int(req["lid"]))
    raise ValueError(f"unknown op {op!r}")


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    """Answer requests until stdin closes."""
    try:
        mad = Mad()
    except OSError as exc:
        stdout.write(json.dumps({"ok": False, "error": str(exc)}) + "\n")
        stdout.flush()
        return
    stdout.write(json.dumps({"ok": True, "ready": True}) + "\n")
    stdout.flush()
    for line in stdin:
        try:
            reply = {"ok": True, "data": answer(mad, json.loads(line))}
        except (ValueError, KeyError, TypeError) as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
