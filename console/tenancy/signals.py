"""Celery hooks that restore the enqueuing request's correlation id inside the task, and the
audit row of a login lockout (django-axes' ``user_locked_out``)."""

from typing import Any

from axes.signals import user_locked_out
from celery import signals

from console.tenancy.context import (
    clean_correlation_id,
    reset_correlation_id,
    set_correlation_id,
)
from console.tenancy.logins import record_lockout

_tokens: dict[str, object] = {}

user_locked_out.connect(record_lockout, dispatch_uid="console.tenancy.login_lockout_audit")


@signals.task_prerun.connect
def _restore_correlation_id(task_id: str | None = None, task: Any = None, **_: object) -> None:
    header = getattr(getattr(task, "request", None), "correlation_id_console", None)
    _tokens[task_id or ""] = set_correlation_id(clean_correlation_id(header))


@signals.task_postrun.connect
def _clear_correlation_id(task_id: str | None = None, **_: object) -> None:
    token = _tokens.pop(task_id or "", None)
    if token is not None:
        reset_correlation_id(token)  # type: ignore[arg-type]
