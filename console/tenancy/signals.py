"""Celery hooks that restore the enqueuing request's correlation id inside the task."""

from typing import Any

from celery import signals

from console.tenancy.context import (
    clean_correlation_id,
    reset_correlation_id,
    set_correlation_id,
)

_tokens: dict[str, object] = {}


@signals.task_prerun.connect
def _restore_correlation_id(task_id: str | None = None, task: Any = None, **_: object) -> None:
    header = getattr(getattr(task, "request", None), "correlation_id_console", None)
    _tokens[task_id or ""] = set_correlation_id(clean_correlation_id(header))


@signals.task_postrun.connect
def _clear_correlation_id(task_id: str | None = None, **_: object) -> None:
    token = _tokens.pop(task_id or "", None)
    if token is not None:
        reset_correlation_id(token)  # type: ignore[arg-type]
