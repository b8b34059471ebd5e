"""libibmad through ctypes: PMA and LID-routed SMP queries, one MAD in flight (the sync mode).

libibmad follows redirects and retries on its own; the pipelined mode
(:mod:`console.fabric.diags.mad_pipeline`) re-asks redirected queries through this class and
borrows the umad port and agents it opened. Standard library only.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import TYPE_CHECKING

from console.fabric.diags.mad_wire import (
    DATA_SIZE,
    DEFAULT_TIMEOUT_MS,
    PERF_CLASS,
    QP1_QKEY,
    SMI_CLASS,
    Query,
    Stats,
)

if TYPE_CHECKING:
    from _ctypes import _CArgObject  # what ctypes.byref returns; private, stubs only


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

    def _portid(self, lid: int, qp: int) -> _CArgObject:
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
