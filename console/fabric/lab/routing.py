"""Which routing engine OpenSM actually used, read from its log.

OpenSM never reports the engine over the wire; it logs it. On every routing pass it writes
``osm_ucast_mgr_process: <engine> tables configured on all switches``. When ftree rejects the
topology (one spine link down is enough) it logs, in order::

    fabric_validate_topology: ERR AB09: Different number of upward port groups on switches:
    fabric_validate_topology: ERR AB0D: Fabric topology hasn't been identified as FatTree
    Fabric topology is not a fat-tree
    ucast_mgr_route: ftree: cannot build lid matrices
    osm_ucast_mgr_process: minhop tables configured on all switches

so the last "tables configured" line is the truth. This needs ``force_log_flush TRUE``
(the lab's opensm.conf sets it), otherwise the log lags by a buffer.

The same log tells when OpenSM ended a heavy sweep (``SUBNET UP``): :func:`log_mark` and
:func:`swept_since` watch for one after a mark (a push waiting for its reload, a compare
deciding whether its stored discovery is still current).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

_CONFIGURED_RE = re.compile(r"osm_ucast_mgr_process: (\S+) tables configured on all switches")
_FAILED_RE = re.compile(r"ucast_mgr_route: (\S+): cannot build lid matrices")
_EVIDENCE_RE = re.compile(r"(ERR AB[0-9A-F]{2}|not a fat-tree|cannot build lid matrices|tables configured)")
# What OpenSM logs (level SYS, flushed: force_log_flush TRUE) when a heavy sweep ends.
SWEEP_DONE = (b"SUBNET UP", b"Errors during initialization")


def log_mark(log: Path) -> int:
    """A mark in OpenSM's log (its size now); :func:`swept_since` tells whether a sweep ended
    after it. 0 when there is no log yet."""
    try:
        return log.stat().st_size
    except FileNotFoundError:
        return 0


def swept_since(log: Path, mark: int) -> bool:
    """True when OpenSM logged the end of a heavy sweep (SUBNET UP, or its error twin) after
    ``mark``. A log that shrank (OpenSM restarted on a fresh log) is read whole."""
    try:
        with open(log, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(mark if mark <= size else 0)
            tail = fh.read()
    except FileNotFoundError:
        return False
    return any(word in tail for word in SWEEP_DONE)


class HasOpenSmLog(Protocol):
    """Anything that knows where OpenSM logs and which engine it was asked for (e.g. a Lab)."""

    @property
    def opensm_log(self) -> Path: ...

    @property
    def routing_engine(self) -> str: ...


@dataclass(frozen=True)
class RoutingStatus:
    """The engine asked for, the engine that last configured the switches, and why."""

    configured: str
    in_use: str | None
    evidence: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fallback(self) -> bool:
        """True when OpenSM silently routed with a different engine than configured."""
        wanted = self.configured.split(",")[0]
        return self.in_use is not None and self.in_use != wanted


def routing_status_from_log(log_text: str, configured: str) -> RoutingStatus:
    """Derive :class:`RoutingStatus` from OpenSM log text (only the last routing pass counts)."""
    lines = log_text.splitlines()
    last = None
    for i in range(len(lines) - 1, -1, -1):
        if _CONFIGURED_RE.search(lines[i]):
            last = i
            break
    if last is None:
        return RoutingStatus(configured, None)
    # Evidence: the lines of this routing pass, back to the previous "tables configured".
    start = last - 1
    while start >= 0 and not _CONFIGURED_RE.search(lines[start]):
        start -= 1
    evidence = tuple(line.strip() for line in lines[start + 1 : last + 1] if _EVIDENCE_RE.search(line))
    match = _CONFIGURED_RE.search(lines[last])
    assert match is not None
    return RoutingStatus(configured, match[1], evidence)


def routing_engine_in_use(lab: HasOpenSmLog) -> RoutingStatus:
    """Routing status of a lab (or any OpenSM whose log we can read)."""
    try:
        text = lab.opensm_log.read_text(errors="replace")
    except FileNotFoundError:
        text = ""
    return routing_status_from_log(text, lab.routing_engine)


def routing_of(log: Path, engine: str) -> dict[str, Any]:
    """The routing check as the console stores and shows it: ``configured``, ``in_use``,
    ``fallback`` and ``evidence``, from OpenSM's log ``log`` (asked for ``engine``)."""
    status = routing_engine_in_use(_LogOf(log, engine))
    return {
        "configured": status.configured,
        "in_use": status.in_use,
        "fallback": status.fallback,
        "evidence": list(status.evidence),
    }


@dataclass(frozen=True)
class _LogOf:
    opensm_log: Path
    routing_engine: str


def wait_for_routing(
    lab: HasOpenSmLog, *, fallback: bool, timeout: float = 15.0, interval: float = 0.2
) -> RoutingStatus:
    """Poll until the routing status has ``fallback`` as asked; returns the last status seen."""
    deadline = time.monotonic() + timeout
    while True:
        status = routing_engine_in_use(lab)
        if status.in_use is not None and status.fallback == fallback:
            return status
        if time.monotonic() > deadline:
            return status
        time.sleep(interval)
