"""The Celery application.

Settings come from Django's (``CELERY_*``). In embedded mode the broker is ``memory://`` and the
worker and beat run as threads of the web process (see :mod:`console.embedded`).
"""

import os

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
# The process's default app in every thread: the layers below the project wiring publish tasks by
# name through ``celery.current_app`` and must never fall back to Celery's unconfigured default.
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.before_task_publish.connect
def _propagate_correlation_id(headers: dict | None = None, **_: object) -> None:
    """Carry the request's correlation id into the task so its audit rows share it."""
    from console.tenancy.context import current_correlation_id

    if headers is not None and "correlation_id_console" not in headers:
        headers["correlation_id_console"] = current_correlation_id()
