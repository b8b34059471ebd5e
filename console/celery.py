"""The Celery application.

Settings come from Django's (``CELERY_*``). In embedded mode the broker is ``memory://`` and the
worker and beat run as threads of the web process (see :mod:`console.embedded`).
"""

import datetime as dt
import logging
import os
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


@signals.beat_init.connect
def _recover_on_beat_start(**_: object) -> None:
    recover_in_flight()


@signals.before_task_publish.connect
def _propagate_correlation_id(headers: dict | None = None, **_: object) -> None:
    """Carry the request's correlation id into the task so its audit rows share it."""
    from console.tenancy.context import current_correlation_id

    if headers is not None and "correlation_id_console" not in headers:
        headers["correlation_id_console"] = current_correlation_id()
