"""What the agent on a subnet-manager host reads for the live collector, and how it travels.

The collector runs centrally (it needs the database, the alarms and the channel layer); the
counters, the topology, the forwarding tables and OpenSM's routing log are read on the SM host,
by its agent, with the same readers a local collector uses (:class:`MadReader`, the fast path,
else :class:`PerfqueryReader`). The agent keeps one reader for its connection's life, so the MAD
reader's error sums and cached link states carry from sweep to sweep exactly as they do locally.

On the wire a reading is a row ``[switch, port, xmit_words, rcv_words, errors, state]`` with the
errors in :data:`WATCHED_COUNTERS` order (``null`` where a counter was not read): a sweep of the
2,048-GPU lab's 6,144 switch ports is about 400 KB of JSON.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from console.fabric.drivers.hosts import OpenSmHost
from console.fabric.lab.routing import routing_engine_in_use
from console.telemetry.core import WATCHED_COUNTERS, PortReading
from console.telemetry.readers import CounterReader, MadReader, PerfqueryReader, PortKey, ReaderError

log = logging.getLogger(__name__)
Op = Callable[[dict[str, Any], Callable[[str, str], None]], dict[str, Any]]


def readings_to_json(readings: Mapping[PortKey, PortReading]) -> list[list[Any]]:
    """The rows of a read (see the module docstring)."""
    return [
        [sw, port, r.xmit_words, r.rcv_words, [r.errors.get(n) for n in WATCHED_COUNTERS], r.state]
        for (sw, port), r in readings.items()
    ]


def readings_from_json(rows: list[list[Any]]) -> dict[PortKey, PortReading]:
    """The readings the rows stand for."""
    out: dict[PortKey, PortReading] = {}
    for sw, port, xmit, rcv, errors, state in rows:
        counted = {n: int(v) for n, v in zip(WATCHED_COUNTERS, errors, strict=True) if v is not None}
        out[(str(sw), int(port))] = PortReading(int(xmit), int(rcv), counted, str(state))
    return out


class _Log:
    def __init__(self, opensm_log: Path, routing_engine: str) -> None:
        self.opensm_log, self.routing_engine = opensm_log, routing_engine


def routing_on(host: OpenSmHost) -> dict[str, Any]:
    """Configured vs in-use routing engine from OpenSM's log on ``host``, and where the log ends
    now (a new routing pass moves it; -1: no log readable)."""
    log_path, engine = host.sm_log()
    if log_path is None:
        return {"configured": engine, "in_use": None, "fallback": False, "mark": -1}
    status = routing_engine_in_use(_Log(log_path, engine))
    mark = log_path.stat().st_size if log_path.exists() else 0
    return {"configured": status.configured, "in_use": status.in_use, "fallback": status.fallback, "mark": mark}


class CounterOps:
    """The agent's telemetry operations on its host: ``topology``, ``read_counters``, ``lft``,
    ``routing``."""

    def __init__(self, host: OpenSmHost) -> None:
        self.host = host
        self.reader: CounterReader | None = None
        self.kind = ""
        self._lock = threading.Lock()  # one read at a time: the reader's caches are per sweep

    def ops(self) -> dict[str, Op]:
        return {
            "topology": lambda payload, progress: {"stdout": self.host.diags(timeout=60).run("ibnetdiscover").stdout},
            "read_counters": self._read,
            "lft": self._lft,
            "routing": lambda payload, progress: self.routing(),
        }

    def _reader(self) -> CounterReader:
        if self.reader is None:
            diags = self.host.diags(timeout=30)
            mad = MadReader(diags.env)
            try:
                mad._start()
                self.reader, self.kind = mad, "mad"
            except ReaderError as exc:
                log.warning("libibmad helper unavailable (%s); reading counters with perfquery", exc)
                self.reader, self.kind = PerfqueryReader(diags), "perfquery"
        return self.reader

    def _read(self, payload: dict[str, Any], progress: Callable[[str, str], None]) -> dict[str, Any]:
        state = payload.get("state")
        with self._lock:
            reader = self._reader()
            if payload.get("fresh") and isinstance(reader, PerfqueryReader):
                reader.expect(payload["ports"])
            try:
                got = reader.read(
                    payload["ports"],
                    payload["lids"],
                    state=None if state is None else {(str(sw), int(p)) for sw, p in state},
                )
            except ReaderError:
                self.close()  # a new helper next time (the fabric re-swept, the helper died)
                raise
            last = dict(getattr(reader, "last", {}) or {})
        return {"rows": readings_to_json(got), "last": {k: v for k, v in last.items() if isinstance(v, int | float)}}

    def _lft(self, payload: dict[str, Any], progress: Callable[[str, str], None]) -> dict[str, Any]:
        with self._lock:
            return {"table": self._reader().lft(int(payload["lid"]), int(payload["top"]))}

    def routing(self) -> dict[str, Any]:
        return routing_on(self.host)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.reader = None
