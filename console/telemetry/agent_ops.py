"""What the agent on a subnet-manager host reads for the live collector, and how it travels.

The collector runs centrally (it needs the database, the alarms and the channel layer); the
counters, the topology, the forwarding tables and OpenSM's routing log are read on the SM host,
by its agent, with the same readers a local collector uses (:class:`MadReader`, the fast path,
else :class:`PerfqueryReader`). The agent keeps one reader for its connection's life, so the MAD
reader's error sums and cached link states carry from sweep to sweep exactly as they do locally.

On the wire a sweep is compact, because it crosses the socket and the channel layer every
second: the data counters of every port as one flat list ``[switch index, port, xmit_words,
rcv_words, …]`` (switches in the order the request listed them), and the error counters and link
state only of the ports where they changed since this agent last sent them (``[switch index,
port, e1 … e6, state index, …]``, errors in :data:`WATCHED_COUNTERS` order, -1 where not read);
the whole zlib-compressed (level 1) and base64-encoded. The collector's reader keeps the last
errors and states; a request marked ``fresh`` (a new reader, or one whose last request failed)
makes the agent send them all again. A sweep of the 2,048-GPU lab's 6,240 switch ports is about
65 KB instead of 430 KB of row JSON.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from console.fabric.agents.runtime import Op, Progress
from console.fabric.diags.mad import MadError
from console.fabric.drivers.hosts import OpenSmHost
from console.fabric.lab.routing import routing_of
from console.telemetry.core import WATCHED_COUNTERS, PortReading
from console.telemetry.readers import CounterReader, MadReader, PerfqueryReader, PortKey, ReaderError
from designer.imports import phy

log = logging.getLogger(__name__)
#: how the ``mad`` operation's error begins when the host has no MAD helper
NO_HELPER = "no MAD helper"
#: a relayed answer longer than this (base64 characters) goes in pieces: a socket's frames are
#: bounded (uvicorn --ws-max-size 64 KiB), and a first sweep's part or a big forwarding table
#: can pass it
PIECE_CHARS = 32 * 1024


def pack(data: bytes) -> str:
    """zlib level 1, base64: what the ``mad`` operation's requests and answers travel as."""
    return base64.b64encode(zlib.compress(data, 1)).decode("ascii")


def unpack(text: str) -> bytes:
    return zlib.decompress(base64.b64decode(text))


def _numbers(last: Mapping[str, Any]) -> dict[str, int | float]:
    return {k: v for k, v in last.items() if isinstance(v, int | float)}


def encode_sweep(
    readings: Mapping[PortKey, PortReading], switches: list[str], sent: dict[PortKey, tuple[Any, ...]]
) -> str:
    """A sweep's readings as the module docstring says; ``sent`` (what the collector holds) is
    updated to what this sweep sends."""
    index = {sw: i for i, sw in enumerate(switches)}
    states: dict[str, int] = {}
    data: list[int] = []
    changed: list[int] = []
    for (sw, port), r in readings.items():
        si = index[sw]
        data += (si, port, r.xmit_words, r.rcv_words)
        now = (tuple(r.errors.get(n, -1) for n in WATCHED_COUNTERS), r.state)
        if sent.get((sw, port)) != now:
            sent[(sw, port)] = now
            changed += (si, port, *now[0], states.setdefault(r.state, len(states)))
    body = json.dumps({"d": data, "c": changed, "s": list(states)}, separators=(",", ":"))
    return pack(body.encode())


def decode_sweep(
    text: str, switches: list[str], held: dict[PortKey, tuple[dict[str, int], str]]
) -> dict[PortKey, PortReading]:
    """The readings of :func:`encode_sweep`'s text; ``held`` (the errors and state last received
    per port) is updated and fills in the ports that did not change."""
    body = json.loads(unpack(text))
    states = body["s"]
    width = 2 + len(WATCHED_COUNTERS) + 1
    changed = body["c"]
    for i in range(0, len(changed), width):
        row = changed[i : i + width]
        errors = {n: int(v) for n, v in zip(WATCHED_COUNTERS, row[2:-1], strict=True) if v >= 0}
        held[(switches[row[0]], int(row[1]))] = (errors, str(states[row[-1]]))
    data = body["d"]
    out: dict[PortKey, PortReading] = {}
    for i in range(0, len(data), 4):
        key = (switches[data[i]], int(data[i + 1]))
        errors, state = held.get(key, ({}, ""))
        out[key] = PortReading(int(data[i + 2]), int(data[i + 3]), errors, state)
    return out


def routing_on(host: OpenSmHost) -> dict[str, Any]:
    """Configured vs in-use routing engine from OpenSM's log on ``host``, and where the log ends
    now (a new routing pass moves it; -1: no log readable)."""
    log_path, engine = host.sm_log()
    if log_path is None:
        return {"configured": engine, "in_use": None, "fallback": False, "mark": -1}
    routing = routing_of(log_path, engine)
    mark = log_path.stat().st_size if log_path.exists() else 0
    return {
        "configured": routing["configured"],
        "in_use": routing["in_use"],
        "fallback": routing["fallback"],
        "mark": mark,
    }


def phy_on(host: OpenSmHost) -> dict[str, Any]:
    """The PHY readings recorded on ``host`` (mlxlink's output per port, parsed here: a few
    hundred bytes a port cross the socket, not the files), keyed ``<device>/<port>``."""
    directory = host.phy_dir()
    if directory is None:
        return {"directory": None, "readings": {}, "unread": []}
    readings, unread = phy.read_dir(directory)
    return {
        "directory": str(directory),
        "readings": {f"{device}/{port}": r.as_json() for (device, port), r in readings.items()},
        "unread": unread,
    }


class CounterOps:
    """The agent's telemetry operations on its host: ``mad`` (the MAD helper's answers relayed as
    it writes them: the live collector's fast path, :class:`console.telemetry.agent_reader.RemoteMadSession`),
    ``read_counters`` (readings built here: the path where the helper cannot run, perfquery),
    ``topology``, ``lft``, ``lfts`` (many switches' tables in one request: fabric validation),
    ``routing``, ``phy`` (the recorded transceiver temperatures and BERs)."""

    def __init__(self, host: OpenSmHost, *, counters: str = "mad") -> None:
        self.host = host
        #: "mad": the MAD helper, perfquery where it cannot start; "perfquery": perfquery only
        self.counters = counters
        self.reader: CounterReader | None = None
        self.kind = ""
        self.sent: dict[PortKey, tuple[Any, ...]] = {}  # errors and state last sent, per port
        self._lock = threading.Lock()  # one read at a time: the reader's caches are per sweep

    def ops(self) -> dict[str, Op]:
        return {
            "topology": lambda payload, progress: {"stdout": self.host.diags(timeout=60).run("ibnetdiscover").stdout},
            "mad": self._mad,
            "read_counters": self._read,
            "lft": self._lft,
            "lfts": self._lfts,
            "routing": lambda payload, progress: routing_on(self.host),
            "phy": lambda payload, progress: phy_on(self.host),
        }

    def _reader(self) -> CounterReader:
        if self.reader is None and self.counters == "perfquery":
            self.reader, self.kind = PerfqueryReader(self.host.diags(timeout=30)), "perfquery"
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

    def _mad(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        """The helper's reply to each of ``requests`` (the helper's request lines, :func:`pack`ed:
        a sweep's plan is 62 KB of port rows, 20 KB so; written to the helper unparsed), in
        order, each :func:`pack`ed as a ``part`` report the moment the helper writes it (in
        pieces of :data:`PIECE_CHARS`, ``more`` on all but the last), never parsed here: the console's MAD reader plans the requests and reads the
        replies, so the per-port work is done once, there. A host whose helper cannot start
        answers an error: the console reads through ``read_counters`` instead."""
        requests = unpack(str(payload["requests"])).split(b"\n")  # the helper's lines, written as they are
        with self._lock:
            reader = self._reader()
        if not isinstance(reader, MadReader):
            raise ReaderError(f"{NO_HELPER} on this host: counters are read with perfquery")
        sent = 0
        try:
            for line in reader.session.stream_raw(requests, timeout=float(payload.get("timeout") or 10.0)):
                text = pack(line)
                for at in range(0, len(text), PIECE_CHARS):
                    piece = text[at : at + PIECE_CHARS]
                    progress("part", "running", {"line": piece, "more": at + PIECE_CHARS < len(text)})
                sent += 1
        except MadError:
            with self._lock:
                self.close()  # a new helper next time (the fabric re-swept, the helper died)
            raise
        return {"answers": sent}

    def _read(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        """The counters of ``ports``; with ``parts`` (lists of switches), part by part as a
        stream: each part's sweep goes ahead as a ``part`` progress report while the reader reads
        the next (the collector publishes what it has), and the result says how many went."""
        state = payload.get("state")
        ports: dict[str, list[int]] = payload["ports"]
        parts = [{sw: ports[sw] for sw in part} for part in payload.get("parts") or [list(ports)]]
        due = None if state is None else {(str(sw), int(p)) for sw, ps in state.items() for p in ps}
        with self._lock:
            reader = self._reader()
            if payload.get("fresh"):
                self.sent.clear()
                if isinstance(reader, PerfqueryReader):
                    reader.expect(ports)
            try:
                for part, got in zip(parts, self._parts(reader, parts, payload["lids"], due), strict=True):
                    last = dict(getattr(reader, "last", {}) or {})
                    sweep = encode_sweep(got, list(part), self.sent)
                    progress("part", "running", {"sweep": sweep, "last": _numbers(last)})
            except ReaderError:
                self.close()  # a new helper next time (the fabric re-swept, the helper died)
                raise
        return {"parts": len(parts)}

    @staticmethod
    def _parts(
        reader: CounterReader, parts: list[dict[str, list[int]]], lids: Mapping[str, int], due: set[PortKey] | None
    ) -> Iterator[dict[PortKey, PortReading]]:
        stream = getattr(reader, "read_parts", None)
        if stream is not None:
            yield from stream(parts, lids, state=due)
            return
        for part in parts:
            yield reader.read(part, lids, state=due)

    def _lft(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        with self._lock:
            return {"table": self._reader().lft(int(payload["lid"]), int(payload["top"]))}

    def _lfts(self, payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
        top = int(payload["top"])
        with self._lock:
            reader = self._reader()
            return {"tables": [reader.lft(int(lid), top) for lid in payload["lids"]]}

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.reader = None
