"""Domain errors shared by services, the API (mapped to one error body) and the CLI."""

from __future__ import annotations

from typing import Any


class ConsoleError(Exception):
    """A refusal a user can act on. ``code`` is stable; ``detail`` is for humans."""

    status = 400
    code = "invalid"
    retry_after: int | None = None  # seconds, sent as ``Retry-After`` when set

    def __init__(self, detail: str, *, fields: dict[str, Any] | None = None, code: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.fields = fields or {}
        if code:
            self.code = code

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "detail": self.detail, "fields": self.fields}


class Invalid(ConsoleError):
    status = 400
    code = "invalid"


class Forbidden(ConsoleError):
    status = 403
    code = "permission_denied"


class NotFound(ConsoleError):
    status = 404
    code = "not_found"


class Conflict(ConsoleError):
    status = 409
    code = "conflict"
