"""Embedded mode: a Celery worker and beat as threads of the web process.

Tasks still travel through a broker (kombu's in-memory transport) and run asynchronously on the
worker's thread pool, exactly as they would on a separate worker: only the process boundary is
gone. Nothing here is used when ``REDIS_URL`` is set.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from celery import Celery
from celery.beat import Service
from celery.worker import WorkController

log = logging.getLogger(__name__)


@dataclass
class EmbeddedServices:
    worker: WorkController
    beat: Service | None
    threads: list[threading.Thread]

    def stop(self, timeout: float = 10.0) -> None:
        if self.beat is not None:
            self.beat.stop()
        self.worker.stop(in_sighandler=False)
        for thread in self.threads:
            thread.join(timeout)


class _ReadyWorker(WorkController):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready_event = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        super().on_consumer_ready(consumer)
        self.ready_event.set()


def start(app: Celery, *, concurrency: int = 4, with_beat: bool = True) -> EmbeddedServices:
    """Start a worker (thread pool) and, optionally, beat in daemon threads; wait until ready."""
    worker = _ReadyWorker(
        app=app,
        pool="threads",
        concurrency=concurrency,
        hostname="embedded@%h",
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        loglevel="INFO",
        ready_callback=None,
    )
    threads = [threading.Thread(target=worker.start, name="celery-worker", daemon=True)]
    threads[0].start()
    if not worker.ready_event.wait(30):
        raise RuntimeError("embedded Celery worker did not start within 30 s")
    beat = None
    if with_beat:
        beat = Service(app)
        thread = threading.Thread(target=beat.start, name="celery-beat", daemon=True)
        thread.start()
        threads.append(thread)
    log.info("embedded Celery worker%s running", " and beat" if with_beat else "")
    return EmbeddedServices(worker, beat, threads)
