"""``Idempotency-Key``: a retry of a write gets the first answer instead of doing it twice.

The key is claimed by inserting its row at the start of the request's transaction and the
answer is stored in that same transaction, so:

- a retry after the answer was committed replays it (status and body), whatever happened to
  the first connection (a crash after commit included);
- a failed attempt (an error, a crash before commit) leaves no key, and the retry runs afresh;
- two requests with the same key at once: PostgreSQL's unique index makes the second wait for
  the first to commit and then replay its answer. A wait longer than ``IDEMPOTENCY_WAIT_S``
  answers 409 ``idempotency_key_in_progress`` with ``Retry-After``.

Keys are scoped to the principal (user and tenant) and expire after ``IDEMPOTENCY_KEY_TTL_HOURS``;
``prune_expired`` (beat task ``tenancy.prune_idempotency_keys``) deletes old rows.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from console.tenancy.errors import ConsoleError, Invalid
from console.tenancy.models import IdempotencyKey, Principal

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
LOCK_NOT_AVAILABLE = "55P03"


class KeyReused(ConsoleError):
    status = 422
    code = "idempotency_key_reused"


class KeyInProgress(ConsoleError):
    status = 409
    code = "idempotency_key_in_progress"
    retry_after = 1


@dataclass(frozen=True)
class Answer:
    """What a request answered: replayed as is to a retry with the same key."""

    status: int
    body: Any
    replayed: bool = False


def ttl() -> dt.timedelta:
    return dt.timedelta(hours=float(settings.IDEMPOTENCY_KEY_TTL_HOURS))


def scope_of(principal: Principal) -> str:
    return f"user:{principal.user_id}/tenant:{principal.tenant_id}"


def check_key(key: str) -> str:
    """The key as given, or a 400: 1 to 255 visible ASCII characters (a UUID is typical)."""
    if not 0 < len(key) <= MAX_KEY_LENGTH or not all(33 <= ord(c) <= 126 for c in key):
        raise Invalid(
            f"{HEADER} must be 1 to {MAX_KEY_LENGTH} visible ASCII characters",
            fields={HEADER: ["1-255 visible ASCII characters"]},
        )
    return key


def fingerprint(method: str, path: str, body: Any) -> str:
    """Identifies what was asked: the same key with another fingerprint is a client's mistake."""
    canonical = json.dumps([method.upper(), path, body], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def answer_once(principal: Principal, key: str, request_fingerprint: str, call: Callable[[], Answer]) -> Answer:
    """Run ``call`` once per (principal, key): a retry replays the first answer.

    Answers of 500 and above are not kept (the key is released); an exception from ``call``
    rolls back its changes and the key together.
    """
    scope = scope_of(principal)
    with transaction.atomic():
        now = timezone.now()
        row = _claim(scope, check_key(key), request_fingerprint, now)
        if row.status_code:  # committed by an earlier request: its answer
            if row.fingerprint != request_fingerprint:
                raise KeyReused(
                    f"this {HEADER} was used for a different request; use a new key for a new request",
                    fields={HEADER: ["already used for a different request"]},
                )
            return Answer(row.status_code, row.body, replayed=True)
        answer = call()
        if answer.status >= 500:
            row.delete()
            return answer
        row.status_code = answer.status
        row.body = answer.body
        row.save(update_fields=["status_code", "body"])
        return answer


def _claim(scope: str, key: str, request_fingerprint: str, now: dt.datetime) -> IdempotencyKey:
    """This request's new row (``status_code`` 0), or the committed row of an earlier one."""
    previous = _lock_timeout(f"{int(float(settings.IDEMPOTENCY_WAIT_S) * 1000)}ms")
    try:
        try:
            with transaction.atomic():
                created = IdempotencyKey.objects.create(
                    scope=scope, key=key, fingerprint=request_fingerprint, created_at=now, expires_at=now + ttl()
                )
        except IntegrityError:  # the key exists, committed: an earlier request's (waited for if it was running)
            created = None
        row = created or IdempotencyKey.objects.select_for_update().get(scope=scope, key=key)
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == LOCK_NOT_AVAILABLE:
            raise KeyInProgress(
                f"a request with this {HEADER} is still being processed; retry shortly",
                fields={HEADER: ["in progress"]},
            ) from None
        raise
    _lock_timeout(previous)
    if row.expires_at <= now:  # an expired key is free again: this request takes it over
        row.fingerprint, row.status_code, row.body = request_fingerprint, 0, None
        row.created_at, row.expires_at = now, now + ttl()
        row.save()
    return row


def _lock_timeout(value: str | None) -> str | None:
    """Set this transaction's row-lock wait limit; returns the one it replaces."""
    if connection.vendor != "postgresql" or value is None:
        return None  # SQLite serialises writers on BEGIN IMMEDIATE: nothing waits on a row here
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('lock_timeout'), set_config('lock_timeout', %s, true)", [value])
        row = cursor.fetchone()
    return str(row[0]) if row else None


def prune_expired(*, now: dt.datetime | None = None) -> int:
    """Delete expired keys; returns how many."""
    deleted, _ = IdempotencyKey.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted
