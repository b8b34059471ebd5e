"""Runs collectors for several fabrics until told to stop (the command, and ``up``'s thread)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections

from console.fabric.models import Fabric
from console.telemetry.collector import CollectorOptions, FabricCollector

log = logging.getLogger(__name__)
RETRY_S = 5.0


def collect_fabrics(
    fabrics: list[Fabric],
    options: CollectorOptions,
    stop: threading.Event,
    *,
    sweeps: int | None = None,
    log: Callable[[str], object] = log.info,
) -> None:
    """Sweep every fabric each interval; a fabric whose lab is down is retried every RETRY_S."""
    collectors: dict[int, FabricCollector] = {}
    retry_at: dict[int, float] = {}
    done = 0
    try:
        while not stop.is_set() and (sweeps is None or done < sweeps):
            started = time.monotonic()
            for fabric in fabrics:
                collector = collectors.get(fabric.pk)
                if collector is None:
                    if retry_at.get(fabric.pk, 0) > started:
                        continue
                    try:
                        collector = FabricCollector(fabric, options)
                        collector.setup()
                        collectors[fabric.pk] = collector
                        log(f"collector of {fabric.name}: {len(collector.lm.ends)} links")
                    except Exception as exc:
                        log(f"collector of {fabric.name} not ready: {exc}")
                        retry_at[fabric.pk] = started + RETRY_S
                        close_old_connections()
                        continue
                try:
                    collector.sweep()
                except Exception as exc:
                    log(f"sweep of {fabric.name} failed: {exc}; reconnecting")
                    collector.close()
                    collectors.pop(fabric.pk, None)
                    close_old_connections()
            done += 1
            stop.wait(max(0.0, options.interval - (time.monotonic() - started)))
    finally:
        for collector in collectors.values():
            collector.close()


def start_thread(fabrics: list[Fabric], options: CollectorOptions) -> threading.Event:
    """Run :func:`collect_fabrics` in a daemon thread (embedded mode); set the event to stop."""
    stop = threading.Event()
    thread = threading.Thread(
        target=collect_fabrics, args=(fabrics, options, stop), name="telemetry-collector", daemon=True
    )
    thread.start()
    return stop
