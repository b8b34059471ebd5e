"""The collector's history writer: sweeps averaged over ``store_interval``, one sample per link.

A sample is written in a background thread (one row per link, ~0.5 s for the 2,048-GPU fabric, is
not the sweep's business), or in the caller's thread on an in-memory database (a thread would have
a database of its own).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import DatabaseError, close_old_connections, connections
from django.db.backends.sqlite3.base import DatabaseWrapper as SQLiteDatabaseWrapper
from django.utils import timezone

from console.telemetry import services
from console.telemetry.core import LinkStatus
from console.telemetry.linkmap import LinkMap

log = logging.getLogger(__name__)


def _in_memory_db() -> bool:
    connection = connections["default"]
    return isinstance(connection, SQLiteDatabaseWrapper) and connection.is_in_memory_db()


class HistoryWriter:
    """Accumulates one fabric's link statuses and writes their average every ``interval`` seconds."""

    def __init__(self, fabric_id: int, interval: float) -> None:
        self.fabric_id = fabric_id
        self.interval = interval
        self.acc: dict[str, list[float]] = {}
        self.acc_counts: dict[str, dict[str, int]] = {}  # link → errors by counter (only those that rose)
        self.acc_since = time.monotonic()
        self._pool: ThreadPoolExecutor | None = None

    def add(self, statuses: dict[str, LinkStatus], lm: LinkMap) -> None:
        """Count one sweep in; write the sample when the interval is over."""
        for lid, st in statuses.items():
            row = self.acc.setdefault(lid, [0.0, 0.0, 0.0, 0.0, 1.0, 0.0])
            row[0] += st.tx_bps
            row[1] += st.rx_bps
            row[2] += st.utilisation
            row[3] += sum(st.errors.values())
            for name, value in st.errors.items():
                if value:
                    counts = self.acc_counts.setdefault(lid, {})
                    counts[name] = counts.get(name, 0) + int(value)
            row[4] = min(row[4], 1.0 if st.up else 0.0)
            row[5] += 1
        if time.monotonic() - self.acc_since < self.interval:
            return
        rows = {
            lid: {
                "tx_bps": r[0] / r[5],
                "rx_bps": r[1] / r[5],
                "util": r[2] / r[5],
                "errors": int(r[3]),
                "error_counts": self.acc_counts.get(lid, {}),
                "up": bool(r[4]),
            }
            for lid, r in self.acc.items()
        }
        where = {lid: (e.switch, e.tier) for lid, e in lm.ends.items()}
        self._write(timezone.now(), rows, where)
        self.acc, self.acc_counts, self.acc_since = {}, {}, time.monotonic()

    def _write(self, at: dt.datetime, rows: dict, where: dict) -> None:
        if _in_memory_db():
            services.store_samples(self.fabric_id, at, rows, where)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="telemetry-store")
        self._pool.submit(self._write_now, at, rows, where)

    def _write_now(self, at: dt.datetime, rows: dict, where: dict) -> None:
        try:
            services.store_samples(self.fabric_id, at, rows, where)
        except DatabaseError as exc:
            log.warning("history sample of fabric %s not stored: %s", self.fabric_id, exc)
            close_old_connections()

    def close(self) -> None:
        """Wait for the samples being written and close the writer thread's connection."""
        if self._pool is not None:
            self._pool.submit(connections.close_all)
            self._pool.shutdown(wait=True)
            self._pool = None
