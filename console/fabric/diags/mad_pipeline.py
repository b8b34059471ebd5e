"""Many MADs in flight on one umad port: the helper's pipelined mode, in Python or madpipe.c.

The C loop (``_madpipe.so``, built from ``madpipe.c`` next to this file by scripts/bootstrap.sh)
runs the same algorithm as :meth:`Pipeline._query_python` without the interpreter's cost per MAD;
where it is not built the Python loop runs. Standard library only.
"""

from __future__ import annotations

import ctypes
import gc
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from console.fabric.diags.mad_sync import Mad
from console.fabric.diags.mad_wire import (
    DATA_OFFSET,
    DATA_SIZE,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_MS,
    DEFAULT_WINDOW,
    LID_AT,
    MAD_SIZE,
    METHOD_GET,
    PERF_CLASS,
    PMA_OUT,
    QP1_QKEY,
    REPLY_MAD,
    REPLY_STATUS,
    SMI_CLASS,
    SMP_OUT,
    STATUS_REDIRECT,
    USER_MAD_HEADER,
    Query,
    Stats,
)

if TYPE_CHECKING:
    from _ctypes import CFuncPtr

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


def _fn_pointer(fn: Any, prototype: Callable[[Any], CFuncPtr]) -> tuple[int, object]:
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
        umad: Any = None,
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
            if buf.raw[LID_AT : LID_AT + 2] != b"\x12\x34":
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
            PMA_OUT.pack_into(buf, LID_AT, lid, 1, cls, 1, METHOD_GET, 0, 0, tid, attr, 0, 0, 0, mod & 0xFF)
        else:
            SMP_OUT.pack_into(buf, LID_AT, lid, 1, cls, 1, METHOD_GET, 0, 0, tid, attr, 0, mod)
        return self.umad.umad_send(self.portid, self.agents[cls], buf, MAD_SIZE, timeout_ms, 0) == 0

    def _recv(self, wait_ms: int) -> tuple[int, int, int, bytes] | None:
        """(tid low 32 bits, umad status, MAD status, data) of the next reply, or None."""
        buf = self.recv_buf
        self.recv_len.value = MAD_SIZE
        if self.umad.umad_recv(self.portid, buf, self._recv_len_p, wait_ms) < 0:
            return None
        (ustatus,) = REPLY_STATUS.unpack_from(buf, 4)
        cls, method, mstatus, tid = REPLY_MAD.unpack_from(buf, USER_MAD_HEADER)
        if not ustatus and not method & 0x80:
            return (0, 0, 0, b"")  # a request, not an answer: no transaction of ours matches 0
        if cls == SMI_CLASS:
            mstatus &= 0x7FFF  # the D bit of directed-route SMPs is not a status
        start = USER_MAD_HEADER + DATA_OFFSET
        # typeshed types any ctypes array slice as a list; a c_char array's is bytes.
        return tid, ustatus, mstatus, cast(bytes, buf[start : start + DATA_SIZE])

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
