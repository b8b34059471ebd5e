"""The audit log writer: one row per mutation, in the mutation's own transaction."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid
from typing import Any

from django.db import models, transaction

from console.tenancy.context import Actor, current_correlation_id
from console.tenancy.models import AuditEntry


class AuditOutsideTransaction(RuntimeError):
    """Raised when a caller tries to audit without a surrounding transaction."""


_PLAIN = frozenset({str, int, float, bool})


def _json_safe(value: Any) -> Any:
    if value is None or type(value) in _PLAIN:  # most values: a reservation's placement is ~400 of them
        return value
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()  # durations (a reservation's max_wait) as seconds
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_json_safe(v) for v in value]
    return value


def snapshot(instance: models.Model) -> dict[str, Any]:
    """Concrete field values of a row, JSON-safe, minus anything the model marks secret."""
    exclude: frozenset[str] = getattr(instance, "audit_exclude", frozenset())
    data: dict[str, Any] = {}
    for field in instance._meta.concrete_fields:
        if field.name in exclude:
            continue
        data[field.attname] = _json_safe(getattr(instance, field.attname))
    return data


def _tenant_id_of(instance: models.Model | None) -> int | None:
    if instance is None:
        return None
    lookup = getattr(instance, "tenant_lookup", "tenant")
    if lookup == "pk":
        return instance.pk
    return getattr(instance, f"{lookup}_id", None)


def record(
    actor: Actor,
    action: str,
    instance: models.Model | None = None,
    *,
    object_type: str | None = None,
    object_id: str | int | None = None,
    object_repr: str | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    tenant_id: int | None = None,
    save: bool = True,
) -> AuditEntry:
    """Write one audit row. Must run inside the transaction that performs the mutation, so the
    row and the change commit or roll back together. ``save=False``: the row is returned unsaved,
    for a caller that inserts it in the same statement as the mutation."""
    if not transaction.get_connection().in_atomic_block:
        raise AuditOutsideTransaction(f"audit of {action!r} outside a transaction")
    if instance is not None:
        object_type = object_type or instance._meta.label_lower
        object_id = instance.pk if object_id is None else object_id
        object_repr = object_repr or str(instance)[:200]
    row = AuditEntry(
        actor_kind=actor.kind,
        actor_label=actor.label[:200],
        actor_user_id=actor.user_id,
        actor_token_id=actor.token_id,
        correlation_id=current_correlation_id(),
        tenant_id=tenant_id if tenant_id is not None else _tenant_id_of(instance),
        action=action,
        object_type=object_type or "",
        object_id="" if object_id is None else str(object_id),
        object_repr=(object_repr or "")[:200],
        before=_json_safe(before) if before is not None else None,
        after=_json_safe(after) if after is not None else None,
    )
    if save:
        row.save(force_insert=True)
    return row
