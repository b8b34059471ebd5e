"""Who is acting and under which correlation id.

Every mutation names an :class:`Actor` (a user, a user through an API token, or a system task) and
a correlation id shared by the request, the tasks it enqueues and all their audit rows.
"""

from __future__ import annotations

import contextvars
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

    from console.tenancy.models import ApiToken

_correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("correlation_id", default=None)
_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")


def new_correlation_id() -> str:
    return uuid.uuid4().hex


def clean_correlation_id(value: str | None) -> str:
    """Accept a caller's request id only when it is short and harmless; otherwise mint one."""
    if value and _VALID_ID.match(value):
        return value
    return new_correlation_id()


def current_correlation_id() -> str:
    value = _correlation_id.get()
    if value is None:
        value = new_correlation_id()
        _correlation_id.set(value)
    return value


def set_correlation_id(value: str) -> contextvars.Token:
    return _correlation_id.set(value)


def reset_correlation_id(token: contextvars.Token) -> None:
    _correlation_id.reset(token)


@dataclass(frozen=True)
class Actor:
    """The author of a mutation, as the audit log records it."""

    kind: str  # "user" | "token" | "system" | "cli"
    label: str
    user_id: int | None = None
    token_id: int | None = None

    @classmethod
    def for_user(cls, user: AbstractBaseUser | AnonymousUser, token: ApiToken | None = None) -> Actor:
        if token is not None:
            return cls("token", f"{user.get_username()} (token {token.prefix})", user.pk, token.pk)
        return cls("user", user.get_username(), user.pk)

    @classmethod
    def system(cls, name: str) -> Actor:
        return cls("system", name)

    @classmethod
    def cli(cls, user: AbstractBaseUser | None = None) -> Actor:
        if user is None:
            return cls("cli", "cli")
        return cls("cli", f"cli:{user.get_username()}", user.pk)
