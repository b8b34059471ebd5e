"""The Celery application.

Settings come from Django's (``CELERY_*``). In embedded mode the broker is ``memory://`` and the
worker and beat run as threads of the web process (see :mod:`console.embedded`).
"""

import datetime as dt
import logging
import os
import threading
from typing import Any

from celery import Celery, bootsteps, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
# The process's default app in every thread: the layers below the project wiring publish tasks by
# name through ``celery.current_app`` and must never fall back to Celery's unconfigured default.
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
log = logging.getLogger(__name__)
#: When this process started: a change lease held in this worker's name and not renewed since
#: belongs to an earlier process of the same name, which is gone.
STARTED_AT = dt.datetime.now(dt.UTC)


def recover_in_flight(*, dead_workers: tuple[str, ...] = ()) -> None:
    """Start-up recovery (scheduling.services.recovery.recover); a failure is logged, never
    fatal: the periodic tick and reaper converge the fabric later."""
    from scheduling.services.recovery import recover  # needs the Django apps, loaded by now

    try:
        recover(dead_workers=dead_workers, started_at=STARTED_AT)
    except Exception:
        log.exception("start-up recovery failed; the periodic tick retries")


class RecoverOnConnect(bootsteps.StartStopStep):
    """Run the recovery each time the worker's consumer (re)connects to the broker: at start-up
    and after a broker outage (a restarted Redis may have lost every queued message)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, parent: Any) -> None:
        recover_in_flight(dead_workers=(str(parent.hostname),))


app.steps["consumer"].add(RecoverOnConnect)


class SiteHeartbeat(bootsteps.StartStopStep):
    """While the worker's consumer is connected to the broker, a thread writes the heartbeat of
    every queue it consumes (``site.<slug>``: the site is reachable; console/fabric/sites.py). A
    thread, not a task: it beats while a long push occupies the pool, and never leaves messages
    piling up in the queue of a site whose workers are down."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.stop_event: threading.Event | None = None
        self.thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        from django.conf import settings

        from console.fabric.sites import heartbeat_loop

        self.stop(parent)
        queues = sorted(parent.app.amqp.queues.consume_from)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(
            target=heartbeat_loop,
            args=(queues, str(parent.hostname), self.stop_event, settings.SITE_HEARTBEAT_INTERVAL_S),
            name="site-heartbeat",
            daemon=True,
        )
        self.thread.start()

    def stop(self, parent: Any) -> None:
        if self.stop_event is not None and self.thread is not None:
            self.stop_event.set()
            self.thread.join(10)
        self.stop_event = self.thread = None

    def shutdown(self, parent: Any) -> None:
        self.stop(parent)


app.steps["consumer"].add(SiteHeartbeat)


@signals.beat_init.connect
def _recover_on_beat_start(**_: object) -> None:
    recover_in_flight()


@signals.before_task_publish.connect
def _propagate_correlation_id(headers: dict | None = None, **_: object) -> None:
    """Carry the request's correlation id into the task so its audit rows share it."""
    from console.tenancy.context import current_correlation_id

    if headers is not None and "correlation_id_console" not in headers:
        headers["correlation_id_console"] = current_correlation_id()
