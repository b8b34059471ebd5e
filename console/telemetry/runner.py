"""Runs collectors for several fabrics until told to stop (the command, and ``up``'s thread).

One collector per fabric, each its own loop in its own thread: a fabric whose subnet manager or
lab hangs (a diag waiting for its timeout), or whose site is cut off, delays only its own sweeps,
never another fabric's (another site's).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connection

from console.fabric.models import Fabric
from console.telemetry.collector import CollectorOptions, FabricCollector

log = logging.getLogger(__name__)
RETRY_S = 5.0
Log = Callable[[str], object]


def collect_fabric(
    fabric: Fabric, options: CollectorOptions, stop: threading.Event, *, sweeps: int | None = None, log: Log = log.info
) -> None:
    """Sweep ``fabric`` every interval; while its lab is down, try again every RETRY_S."""
    collector: FabricCollector | None = None
    retry_at = 0.0
    done = 0
    try:
        while not stop.is_set() and (sweeps is None or done < sweeps):
            started = time.monotonic()
            if collector is None and retry_at <= started:
                try:
                    fabric.refresh_from_db()  # its agent may have come (or gone) since
                    collector = FabricCollector(fabric, options)
                    collector.setup()
                    log(f"collector of {fabric.name}: {len(collector.lm.ends)} links")
                except Exception as exc:
                    log(f"collector of {fabric.name} not ready: {exc}")
                    collector = None
                    retry_at = started + RETRY_S
                    close_old_connections()
            if collector is not None:
                try:
                    collector.sweep()
                except Exception as exc:
                    log(f"sweep of {fabric.name} failed: {exc}; reconnecting")
                    collector.close()
                    collector = None
                    close_old_connections()
            done += 1
            stop.wait(max(0.0, options.interval - (time.monotonic() - started)))
    finally:
        if collector is not None:
            collector.close()
        connection.close()  # this thread's own connection


def collect_fabrics(
    fabrics: list[Fabric],
    options: CollectorOptions,
    stop: threading.Event,
    *,
    sweeps: int | None = None,
    log: Log = log.info,
) -> None:
    """Run :func:`collect_fabric` for every fabric, each in its own thread, until ``stop`` is set
    (or each has done ``sweeps``)."""
    threads = [
        threading.Thread(
            target=collect_fabric,
            args=(fabric, options, stop),
            kwargs={"sweeps": sweeps, "log": log},
            name=f"collector-{fabric.pk}",
            daemon=True,
        )
        for fabric in fabrics
    ]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        for thread in threads:
            thread.join(0.5)  # short joins: the calling thread's signal handlers keep running


def start_thread(fabrics: list[Fabric], options: CollectorOptions) -> threading.Event:
    """Run :func:`collect_fabrics` in a daemon thread (embedded mode); set the event to stop."""
    stop = threading.Event()
    thread = threading.Thread(
        target=collect_fabrics, args=(fabrics, options, stop), name="telemetry-collector", daemon=True
    )
    thread.start()
    return stop
