"""A long-lived MAD helper: counters, port states, P_Key tables and forwarding tables via libibmad.

Why: one diag process (``perfquery``, ``smpquery``) per port or switch costs ~40-80 ms of start-up
and ibsim attach. One process that opens its umad port once answers every request of a session.
It runs with the same environment as the diags (``LD_PRELOAD`` of umad2sim, ``SIM_HOST``,
``IBSIM_SOCKNAME`` in the lab; nothing on a real host), so it must be its own process. The client
is :class:`console.fabric.diags.mad.MadSession`.

Two ways to put MADs on the wire, same answers:

- **pipelined** (the default): :class:`Pipeline` builds each 256-byte MAD itself and keeps up to
  ``window`` of them in flight on the umad port libibmad opened (``umad_send``/``umad_recv`` of
  libibumad with libibmad's agents), matches replies by transaction ID, times each MAD out on its
  own and retries it (``retries`` times); answers come back in request order whatever order the
  replies arrived in. A MAD the fabric answers with a redirect (ClassPortInfo) is re-asked
  synchronously through libibmad, which follows redirects.
- **sync**: libibmad's ``pma_query_via``/``smp_query_via``, one MAD in flight (~10,000 MADs/s
  against ibsim, each MAD paying a full round trip through umad2sim and ibsim).

Protocol: one JSON request per stdin line, one JSON reply per stdout line; the first line the
helper writes is ``{"ok": true, "ready": true, "pipelined": bool}`` (or ``{"ok": false,
"error": ...}``)::

    {"op": "ping"}                                    → {"ok": true, "data": "pong"}
    {"op": "counters", "ports": [[lid, port(, mask)], ...]}
                                                      → {"ok": true, "data": [[x, r, errs, state]...]}
    {"op": "lft", "lid": 12, "top": 300}              → {"ok": true, "data": [port per lid...]}
    {"op": "pkeys", "ports": [[lid, port(, blocks)], ...]} → {"ok": true, "data": [[[index, raw]...]...]}
    {"op": "portinfo", "ports": [[lid, port], ...]}   → {"ok": true, "data": [{"lid":..}...]}
    {"op": "nodeinfo", "lids": [lid, ...]}            → {"ok": true, "data": [{"port_guid":..}...]}
    {"op": "sminfo", "lid": 1}                        → {"ok": true, "data": {"act_count": ...}}

Every request may carry ``"mode": "sync" | "pipelined"``, ``"window"`` (MADs in flight),
``"mad_timeout_ms"``, ``"retries"`` and ``"native": false`` (pipelined MADs through the Python loop
even where madpipe.c's is built); every reply carries ``"stats"`` (``mads`` sent, ``seconds``,
``retried``, ``failed``, ``mode``, ``native``). The hello line says ``"native"`` when the C loop
(``_madpipe.so``, built from ``madpipe.c`` by scripts/bootstrap.sh) is loaded: the same algorithm
without the interpreter's cost per MAD.

``counters``: ``mask`` (default 7) picks what is read for the port: 1 the data counters
(PortCountersExtended), 2 the error counters (PortCounters), 4 the link state (PortInfo). The row
is ``null`` when the data counters were asked for and failed; ``errs`` is ``{}`` and ``state``
``""`` when their MAD failed, and both are ``null`` when not asked for. Other per-port answers are
``null`` where the MAD failed (timeout, no such LID). ``pkeys`` is SubnGet(P_KeyTable) of block 0
(the first 32 keys, where OpenSM puts them) or of the first ``blocks`` blocks (``smpquery pkeys``
reads PartitionCap/32 blocks, NodeInfo ``partition_cap`` gives it) and returns the non-zero
entries as ``[index, raw]`` — the top bit of ``raw`` is full membership. The attribute modifier is
``port << 16 | block`` as smpquery sends it; on an HCA the port is its CA port (the one owning the
LID).

Standard library only (no Django): ``python -m console.fabric.diags.madworker``.
"""

from __future__ import annotations

import ctypes
import gc
import json
import random
import struct
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PERF_CLASS, SMI_CLASS = 0x04, 0x01
ATTR_PORT_COUNTERS, ATTR_PORT_COUNTERS_EXT = 0x12, 0x1D
ATTR_NODE_INFO, ATTR_PORT_INFO, ATTR_PKEY_TABLE = 0x11, 0x15, 0x16
ATTR_LFT, ATTR_SM_INFO = 0x19, 0x20
NODE_TYPES = {1: "CA", 2: "Switch", 3: "Router"}
QP1_QKEY = 0x80010000
PORT_STATES = {1: "Down", 2: "Initialize", 3: "Armed", 4: "Active"}
PHYS_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
SM_STATES = {0: "NOTACTIVE", 1: "DISCOVERING", 2: "STANDBY", 3: "MASTER"}
ERROR_FIELDS = (  # (name, offset, size) in the PortCounters attribute
    ("SymbolErrorCounter", 4, 2),
    ("LinkDownedCounter", 7, 1),
    ("PortRcvErrors", 8, 2),
    ("PortXmitDiscards", 14, 2),
)
#: ``counters`` mask bits: what to read for a port.
READ_DATA, READ_ERRORS, READ_STATE = 1, 2, 4
READ_ALL = READ_DATA | READ_ERRORS | READ_STATE

METHOD_GET = 0x01
MAD_SIZE = 256  # a MAD on the wire
DATA_OFFSET = 64  # SMP (LID routed) and PMA attribute data start here in the MAD
DATA_SIZE = 64  # what the helper keeps of an answer (the sync path copies as much)
STATUS_REDIRECT = 0x0002
DEFAULT_WINDOW = 32
DEFAULT_TIMEOUT_MS = 200
DEFAULT_RETRIES = 1
USER_MAD_HEADER = 64  # sizeof(struct ib_user_mad) of the umad ABI (version 5)

#: One MAD to send: (management class, LID, attribute id, attribute modifier). For the PMA
#: (class 0x04) the "modifier" is the port, sent as PortSelect in the data as pma_query_via does.
Query = tuple[int, int, int, int]


class _DrPath(ctypes.Structure):
    _fields_ = [
        ("cnt", ctypes.c_int),
        ("p", ctypes.c_uint8 * 64),
        ("drslid", ctypes.c_uint16),
        ("drdlid", ctypes.c_uint16),
    ]


class _PortId(ctypes.Structure):  # libibmad's ib_portid_t
    _fields_ = [
        ("lid", ctypes.c_int),
        ("drpath", _DrPath),
        ("grh_present", ctypes.c_int),
        ("gid", ctypes.c_uint8 * 16),
        ("qp", ctypes.c_uint32),
        ("qkey", ctypes.c_uint32),
        ("sl", ctypes.c_uint8),
        ("pkey_idx", ctypes.c_uint),
    ]


@dataclass
class Stats:
    """What one request cost on the wire."""

    mode: str = "sync"
    mads: int = 0
    retried: int = 0
    failed: int = 0
    seconds: float = 0.0
    native: bool = False  # the pipelined MADs went through madpipe.c's loop

    def as_dict(self) -> dict:
        return {
            "mode": self.mode,
            "mads": self.mads,
            "retried": self.retried,
            "failed": self.failed,
            "seconds": round(self.seconds, 6),
            "native": self.native,
        }


class Mad:
    """libibmad through ctypes: PMA and LID-routed SMP queries with a per-query timeout (ms)."""

    def __init__(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        lib = ctypes.CDLL("libibmad.so.5")
        lib.mad_rpc_open_port.restype = ctypes.c_void_p
        lib.mad_rpc_open_port.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        for fn in (lib.pma_query_via, lib.smp_query_via):
            fn.restype = ctypes.c_void_p
        lib.pma_query_via.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
        ]
        lib.smp_query_via.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
        ]
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
        ctypes.memset(self.buf, 0, DATA_SIZE)
        ok = self.lib.pma_query_via(self.buf, self._portid(lid, 1), port, self.timeout, attr, self.port)
        return self.buf.raw[:DATA_SIZE] if ok else None

    def smp(self, lid: int, attr: int, mod: int) -> bytes | None:
        ok = self.lib.smp_query_via(self.buf, self._portid(lid, 0), attr, mod, self.timeout, self.port)
        return self.buf.raw[:DATA_SIZE] if ok else None

    def one(self, query: Query) -> bytes | None:
        """One query, synchronously (libibmad follows redirects and retries)."""
        cls, lid, attr, mod = query
        if cls == PERF_CLASS:
            return self.pma(lid, mod, attr)
        return self.smp(lid, attr, mod)

    def query(self, queries: Sequence[Query], stats: Stats) -> list[bytes | None]:
        """Every query, one after the other; None where it failed."""
        stats.mode = "sync"
        out = [self.one(q) for q in queries]
        stats.mads += len(queries)
        stats.failed += sum(1 for r in out if r is None)
        return out


# The umad header (struct ib_user_mad, ABI 5) from the address's LID (offset 28) on, then the MAD
# header: zeroes up to the MAD (sl, path bits, GRH, P_Key index: all 0), base version 1, class,
# class version 1, method, status, class specific, transaction ID, attribute id, reserved,
# modifier; the PMA's request data carries PortSelect in its second byte (pma_query_via).
_LID_AT = 28
_SMP_OUT = struct.Struct(">H34xBBBBHHQHHI")
_PMA_OUT = struct.Struct(">H34xBBBBHHQHHI40xBB")
_REPLY_STATUS = struct.Struct("=I")  # umad status (host order) at offset 4
_REPLY_MAD = struct.Struct(">xBxBH6xI")  # class, method, MAD status, TID low 32 bits


NATIVE_LIBRARY = Path(__file__).with_name("_madpipe.so")  # built from madpipe.c
_SEND_FN = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int
)
_RECV_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
NATIVE_OK, NATIVE_REDIRECT = 1, 2  # madpipe.c's status of a query (0: failed)


def load_native(path: Path = NATIVE_LIBRARY) -> ctypes.CDLL | None:
    """madpipe.c's loop, or None where it was not built (the Python loop runs instead)."""
    try:
        lib = ctypes.CDLL(str(path))
    except OSError:
        return None
    lib.madpipe_query.restype = ctypes.c_int
    lib.madpipe_query.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_uint32),
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_int64),
    ]
    return lib


def _fn_pointer(fn, prototype) -> tuple[int, object]:
    """(address, object to keep alive) of a umad function: a C function as it is, a Python
    callable (the tests' scripted umad port) through a ctypes callback."""
    if isinstance(fn, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        return ctypes.cast(fn, ctypes.c_void_p).value or 0, fn
    callback = prototype(fn)
    return ctypes.cast(callback, ctypes.c_void_p).value or 0, callback


class Pipeline:
    """Many MADs in flight on the umad port ``mad`` opened (its agents, its port id).

    Requests are sent interleaved across destination LIDs (a switch sees one MAD of a batch at a
    time rather than a burst of its own), at most ``window`` outstanding. A reply is matched by
    the low 32 bits of its transaction ID (the kernel and umad2sim rewrite the high bits); a MAD
    whose umad status is non-zero (the kernel's or ibsim's timeout) or that stays unanswered past
    its deadline is sent again with a fresh transaction ID, up to ``retries`` times; late replies
    of earlier attempts are dropped. A non-zero MAD status fails the query without retry (as
    libibmad does), except a redirect, which the synchronous path re-asks.
    """

    def __init__(
        self,
        mad: Mad,
        *,
        window: int = DEFAULT_WINDOW,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        retries: int = DEFAULT_RETRIES,
        umad=None,
        native: bool | None = None,
    ) -> None:
        """``native``: run madpipe.c's loop (True: it must be built; None: where it is)."""
        umad = umad if umad is not None else ctypes.CDLL("libibumad.so.3")
        umad.umad_size.restype = ctypes.c_size_t
        if umad.umad_size() != USER_MAD_HEADER:
            raise OSError(f"unexpected umad header size {umad.umad_size()}")
        umad.umad_set_addr.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        mad.lib.mad_rpc_portid.argtypes = [ctypes.c_void_p]
        mad.lib.mad_rpc_class_agent.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.portid = mad.lib.mad_rpc_portid(mad.port)
        self.agents = {c: mad.lib.mad_rpc_class_agent(mad.port, c) for c in (SMI_CLASS, PERF_CLASS)}
        if self.portid < 0 or min(self.agents.values()) < 0:
            raise OSError("libibmad opened no umad agents")
        self.mad = mad
        self.umad = umad
        self.window = window
        self.timeout_ms = timeout_ms
        self.retries = retries
        # One send buffer per class: QP and Q_Key set once by libibumad, the rest per MAD.
        self.send_buf = {}
        for cls, qp, qkey in ((SMI_CLASS, 0, 0), (PERF_CLASS, 1, QP1_QKEY)):
            buf = ctypes.create_string_buffer(USER_MAD_HEADER + MAD_SIZE)
            umad.umad_set_addr(buf, 0x1234, qp, 0, qkey)
            if buf.raw[_LID_AT : _LID_AT + 2] != b"\x12\x34":
                raise OSError("unexpected umad address layout")
            self.send_buf[cls] = buf
        self.recv_buf = ctypes.create_string_buffer(USER_MAD_HEADER + MAD_SIZE)
        self.recv_len = ctypes.c_int(MAD_SIZE)
        self._recv_len_p = ctypes.pointer(self.recv_len)
        self.tid = random.getrandbits(32)
        self.native = load_native() if native is not False else None
        if native and self.native is None:
            raise OSError(f"{NATIVE_LIBRARY.name} is not built (scripts/bootstrap.sh builds it)")
        if self.native is not None:
            self._umad_fns = (_fn_pointer(umad.umad_send, _SEND_FN), _fn_pointer(umad.umad_recv, _RECV_FN))

    def _next_tid(self) -> int:
        self.tid = (self.tid + 1) & 0xFFFFFFFF or 1
        return self.tid

    def _send(self, query: Query, tid: int, timeout_ms: int) -> bool:
        cls, lid, attr, mod = query
        buf = self.send_buf[cls]
        if cls == PERF_CLASS:  # modifier 0, PortSelect in the data
            _PMA_OUT.pack_into(buf, _LID_AT, lid, 1, cls, 1, METHOD_GET, 0, 0, tid, attr, 0, 0, 0, mod & 0xFF)
        else:
            _SMP_OUT.pack_into(buf, _LID_AT, lid, 1, cls, 1, METHOD_GET, 0, 0, tid, attr, 0, mod)
        return self.umad.umad_send(self.portid, self.agents[cls], buf, MAD_SIZE, timeout_ms, 0) == 0

    def _recv(self, wait_ms: int) -> tuple[int, int, int, bytes] | None:
        """(tid low 32 bits, umad status, MAD status, data) of the next reply, or None."""
        buf = self.recv_buf
        self.recv_len.value = MAD_SIZE
        if self.umad.umad_recv(self.portid, buf, self._recv_len_p, wait_ms) < 0:
            return None
        (ustatus,) = _REPLY_STATUS.unpack_from(buf, 4)
        cls, method, mstatus, tid = _REPLY_MAD.unpack_from(buf, USER_MAD_HEADER)
        if not ustatus and not method & 0x80:
            return (0, 0, 0, b"")  # a request, not an answer: no transaction of ours matches 0
        if cls == SMI_CLASS:
            mstatus &= 0x7FFF  # the D bit of directed-route SMPs is not a status
        start = USER_MAD_HEADER + DATA_OFFSET
        return tid, ustatus, mstatus, buf[start : start + DATA_SIZE]

    @staticmethod
    def _interleaved(queries: Sequence[Query]) -> deque[int]:
        """Indices in send order: round robin over destination LIDs."""
        by_lid: dict[int, list[int]] = {}
        for i, q in enumerate(queries):
            by_lid.setdefault(q[1], []).append(i)
        lanes = list(by_lid.values())
        order: deque[int] = deque()
        for depth in range(max((len(lane) for lane in lanes), default=0)):
            order.extend(lane[depth] for lane in lanes if depth < len(lane))
        return order

    def query(
        self,
        queries: Sequence[Query],
        stats: Stats,
        *,
        window: int | None = None,
        timeout_ms: int | None = None,
        retries: int | None = None,
        native: bool = True,
    ) -> list[bytes | None]:
        """Every query, up to ``window`` in flight; None where it failed (in request order)."""
        stats.mode = "pipelined"
        window = max(1, window or self.window)
        timeout_ms = max(1, timeout_ms or self.timeout_ms)
        retries = self.retries if retries is None else max(0, retries)
        if self.native is not None and native:
            stats.native = True
            out, redirected = self._query_native(queries, stats, window, timeout_ms, retries)
        else:
            out, redirected = self._query_python(queries, stats, window, timeout_ms, retries)
        for i in redirected:
            stats.mads += 1
            out[i] = self.mad.one(queries[i])
            stats.failed += out[i] is None
        return out

    def _query_native(
        self, queries: Sequence[Query], stats: Stats, window: int, timeout_ms: int, retries: int
    ) -> tuple[list[bytes | None], list[int]]:
        n = len(queries)
        flat = (ctypes.c_uint32 * (4 * n))(*(v for q in queries for v in q))
        data = ctypes.create_string_buffer(DATA_SIZE * n)
        status = ctypes.create_string_buffer(n)
        counts = (ctypes.c_int64 * 3)()
        tid = ctypes.c_uint32(self.tid)
        (send, _), (recv, _) = self._umad_fns
        rc = self.native.madpipe_query(  # type: ignore[union-attr]
            send,
            recv,
            self.portid,
            self.agents[SMI_CLASS],
            self.agents[PERF_CLASS],
            self.send_buf[SMI_CLASS],
            self.send_buf[PERF_CLASS],
            self.recv_buf,
            flat,
            n,
            window,
            timeout_ms,
            retries,
            ctypes.byref(tid),
            data,
            status,
            counts,
        )
        if rc != 0:
            raise MemoryError("madpipe_query could not allocate its tables")
        self.tid = tid.value
        stats.mads += counts[0]
        stats.retried += counts[1]
        stats.failed += counts[2]
        raw, codes = data.raw, status.raw
        out: list[bytes | None] = [
            raw[i * DATA_SIZE : (i + 1) * DATA_SIZE] if code == NATIVE_OK else None for i, code in enumerate(codes)
        ]
        return out, [i for i, code in enumerate(codes) if code == NATIVE_REDIRECT]

    def _query_python(
        self, queries: Sequence[Query], stats: Stats, window: int, timeout_ms: int, retries: int
    ) -> tuple[list[bytes | None], list[int]]:
        # Our own deadline backs the kernel's timeout (which umad2sim does not implement).
        grace = timeout_ms / 1000 * 1.25 + 0.01
        out: list[bytes | None] = [None] * len(queries)
        attempts = [0] * len(queries)
        todo = self._interleaved(queries)
        inflight: dict[int, tuple[int, float]] = {}  # tid → (index, deadline), oldest first
        redirected: list[int] = []
        send, recv, clock = self._send, self._recv, time.monotonic

        def again(i: int) -> None:
            if attempts[i] <= retries:
                stats.retried += 1
                todo.appendleft(i)
            else:
                stats.failed += 1

        gc_was = gc.isenabled()
        gc.disable()  # a batch allocates many small tuples and frees them all: no cycles
        try:
            while todo or inflight:
                if todo and len(inflight) < window:
                    deadline = clock() + grace
                    while todo and len(inflight) < window:
                        i = todo.popleft()
                        tid = self._next_tid()
                        attempts[i] += 1
                        stats.mads += 1
                        if send(queries[i], tid, timeout_ms):
                            inflight[tid] = (i, deadline)
                        elif attempts[i] <= retries:
                            stats.retried += 1
                            todo.append(i)
                        else:
                            stats.failed += 1
                    if not inflight:
                        continue
                head = inflight[next(iter(inflight))][1]
                got = recv(max(1, int((head - clock()) * 1000) + 1))
                if got is None:  # nothing within the head's deadline: expire what is overdue
                    now = clock()
                    for tid in list(inflight):
                        i, deadline = inflight[tid]
                        if deadline > now:
                            break
                        del inflight[tid]
                        again(i)
                    continue
                tid, ustatus, mstatus, data = got
                entry = inflight.pop(tid, None)
                if entry is None:  # a late answer to an attempt already given up, or not ours
                    continue
                i = entry[0]
                if ustatus:
                    again(i)
                elif mstatus == STATUS_REDIRECT:
                    redirected.append(i)
                elif mstatus:
                    stats.failed += 1
                else:
                    out[i] = data
        finally:
            if gc_was:
                gc.enable()
        return out, redirected


# -- decoding answers (the same for both paths) ------------------------------------------------


def _errors(data: bytes | None) -> dict[str, int]:
    if data is None:
        return {}
    return {name: int.from_bytes(data[offset : offset + size], "big") for name, offset, size in ERROR_FIELDS}


def _state(data: bytes | None) -> str:
    return PORT_STATES.get(data[32] & 0x0F, "Unknown") if data is not None else ""


def _portinfo(data: bytes | None) -> dict | None:
    if data is None:
        return None
    return {
        "lid": struct.unpack_from(">H", data, 16)[0],
        "sm_lid": struct.unpack_from(">H", data, 18)[0],
        "link_state": PORT_STATES.get(data[32] & 0x0F, "Unknown"),
        "phys_state": PHYS_STATES.get(data[33] >> 4, "Unknown"),
    }


def _nodeinfo(data: bytes | None) -> dict | None:
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


def _sminfo(data: bytes | None) -> dict | None:
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
        errors = _errors(answers[basic_i]) if basic_i >= 0 else None
        state = _state(answers[info_i]) if info_i >= 0 else None
        out.append([xmit, rcv, errors, state])
    return out


def lft(run: Run, lid: int, top: int) -> list[int] | None:
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


@dataclass
class Helper:
    """The helper's state: libibmad, the pipeline when it could be set up, defaults."""

    mad: Mad
    pipeline: Pipeline | None = None
    last: Stats = field(default_factory=Stats)

    @classmethod
    def open(cls) -> Helper:
        mad = Mad()
        try:
            pipeline: Pipeline | None = Pipeline(mad)
        except (OSError, AttributeError):
            pipeline = None  # no libibumad (or an ABI we do not know): synchronous only
        return cls(mad, pipeline)

    def runner(self, req: dict, stats: Stats) -> Run:
        mode = req.get("mode", "pipelined")
        if mode not in ("sync", "pipelined"):
            raise ValueError(f"unknown mode {mode!r}")
        if mode == "sync" or self.pipeline is None:
            return lambda queries: self.mad.query(queries, stats)
        pipe = self.pipeline
        window = int(req["window"]) if "window" in req else None
        timeout = int(req["mad_timeout_ms"]) if "mad_timeout_ms" in req else None
        retries = int(req["retries"]) if "retries" in req else None
        native = bool(req.get("native", True))
        return lambda queries: pipe.query(
            queries, stats, window=window, timeout_ms=timeout, retries=retries, native=native
        )


def answer(helper: Helper, req: dict, stats: Stats | None = None) -> object:
    """The data of one request (raises ValueError/KeyError/TypeError on a bad one)."""
    stats = stats if stats is not None else Stats()
    op = req["op"]
    if op == "ping":
        return "pong"
    run = helper.runner(req, stats)
    if op == "counters":
        return counters(run, req["ports"])
    if op == "lft":
        return lft(run, int(req["lid"]), int(req["top"]))
    if op == "pkeys":  # ports: [lid, port] or [lid, port, blocks]
        return pkeys(run, req["ports"])
    if op == "portinfo":
        ports = [(int(p[0]), int(p[1])) for p in req["ports"]]
        return [_portinfo(a) for a in run([(SMI_CLASS, lid, ATTR_PORT_INFO, port) for lid, port in ports])]
    if op == "nodeinfo":
        lids = [int(lid) for lid in req["lids"]]
        return [_nodeinfo(a) for a in run([(SMI_CLASS, lid, ATTR_NODE_INFO, 0) for lid in lids])]
    if op == "sminfo":
        return _sminfo(run([(SMI_CLASS, int(req["lid"]), ATTR_SM_INFO, 0)])[0])
    raise ValueError(f"unknown op {op!r}")


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    """Answer requests until stdin closes."""
    try:
        helper = Helper.open()
    except OSError as exc:
        stdout.write(json.dumps({"ok": False, "error": str(exc)}) + "\n")
        stdout.flush()
        return
    pipe = helper.pipeline
    hello = {
        "ok": True,
        "ready": True,
        "pipelined": pipe is not None,
        "native": pipe is not None and pipe.native is not None,
    }
    stdout.write(json.dumps(hello) + "\n")
    stdout.flush()
    for line in stdin:
        stats = Stats()
        started = time.monotonic()
        try:
            reply = {"ok": True, "data": answer(helper, json.loads(line), stats)}
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        stats.seconds = time.monotonic() - started
        reply["stats"] = stats.as_dict()
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve()
