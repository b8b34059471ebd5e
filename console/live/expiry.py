"""When a socket's authentication ends: its session's or its API token's expiry.

A socket is authorised once, at connect; without this it would stream on after the session or
token that opened it expired. The consumer asks :func:`access_ends_at` at connect and again at
the time it answered (a session can be extended meanwhile), and closes the socket when the
answer is "ended".
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from importlib import import_module

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.utils import timezone

from console.tenancy.models import ApiToken


@dataclass(frozen=True)
class Access:
    """Whether a socket's credentials still hold, and until when (None: no expiry)."""

    valid: bool
    ends_at: dt.datetime | None = None


ENDED = Access(valid=False)


def _session_store(session_key: str) -> SessionBase:
    engine = import_module(settings.SESSION_ENGINE)
    store: SessionBase = engine.SessionStore(session_key=session_key)
    return store


def session_access(session_key: str | None) -> Access:
    """A session's state as its backend stores it (the database backend's ``expire_date``)."""
    if not session_key:
        return ENDED
    store = _session_store(session_key)
    from_db = getattr(store, "_get_session_from_db", None)
    if from_db is not None:
        # database-backed sessions: the expiry the row holds, not one computed from "now"
        row = from_db()
        return Access(valid=True, ends_at=row.expire_date) if row is not None else ENDED
    # other backends: a session that has ended loads empty
    if not store.load():
        return ENDED
    return Access(valid=True, ends_at=store.get_expiry_date())


def token_access(token_id: int) -> Access:
    """An API token's state: revoked or expired tokens have ended."""
    token = ApiToken.objects.filter(pk=token_id).values("revoked_at", "expires_at").first()
    if token is None or token["revoked_at"] is not None:
        return ENDED
    expires_at: dt.datetime | None = token["expires_at"]
    if expires_at is not None and expires_at <= timezone.now():
        return ENDED
    return Access(valid=True, ends_at=expires_at)


def access_ends_at(*, session_key: str | None, token_id: int | None) -> Access:
    """The socket's credentials: its token when it came with one, else its session."""
    if token_id is not None:
        return token_access(token_id)
    return session_access(session_key)
