"""API throttling: per client address without valid credentials, per user on a session, per token.

DRF's ``SimpleRateThrottle`` underneath; the rates are read from ``settings.CONSOLE_THROTTLE_RATES``
at request time (not frozen at import as DRF's class attribute is) and the counters live in the
``throttle`` cache, Redis when configured, so every web process shares them. A refused request
answers 429 with ``Retry-After`` and the one error body, code ``throttled``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.core.cache import caches
from django.http import HttpRequest, JsonResponse
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from console.tenancy.models import ApiToken

if TYPE_CHECKING:  # rest_framework.views imports the authentication classes, which import this
    from rest_framework.views import APIView


def client_address(request: HttpRequest) -> str:
    """The client's address: REMOTE_ADDR, or the X-Forwarded-For entry written by the outermost
    of ``CONSOLE_TRUSTED_PROXIES`` proxies (never an entry the client could have written)."""
    remote = str(request.META.get("REMOTE_ADDR", ""))
    proxies = api_settings.NUM_PROXIES or 0
    forwarded = [part.strip() for part in str(request.META.get("HTTP_X_FORWARDED_FOR", "")).split(",")]
    forwarded = [part for part in forwarded if part]
    if proxies > 0 and forwarded:
        return forwarded[-min(proxies, len(forwarded))]
    return remote


class ConsoleRateThrottle(SimpleRateThrottle):
    """A throttle whose rate comes from ``CONSOLE_THROTTLE_RATES[scope]`` (empty: no limit)."""

    def __init__(self) -> None:
        self.cache = caches["throttle"]
        super().__init__()

    def get_rate(self) -> str | None:
        rate: str = getattr(settings, "CONSOLE_THROTTLE_RATES", {}).get(self.scope, "")
        return rate.strip() or None

    def wait(self) -> float | None:
        # Whole seconds, at least one: DRF writes Retry-After with "%d", and "0" invites a retry storm.
        wait = super().wait()
        return None if wait is None else float(max(1, math.ceil(wait)))

    def get_ident(self, request: Request) -> str:
        # A DRF request in views; the plain Django request in the middleware (check_anonymous).
        raw: HttpRequest = request._request if isinstance(request, Request) else request
        return client_address(raw)


class AnonymousRateThrottle(ConsoleRateThrottle):
    """Requests that carry no valid credentials, per client address."""

    scope = "anon"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class SessionRateThrottle(ConsoleRateThrottle):
    """Requests of a signed-in user over a session cookie, per user."""

    scope = "session"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not request.user or not request.user.is_authenticated or request.auth is not None:
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class TokenRateThrottle(ConsoleRateThrottle):
    """Requests authenticated by an API token, per token."""

    scope = "token"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if not isinstance(request.auth, ApiToken):
            return None
        return self.cache_format % {"scope": self.scope, "ident": request.auth.pk}


class PlanRateThrottle(ConsoleRateThrottle):
    """Design computations (plans, compares, validations of posted graphs), per user or token:
    each can cost seconds of CPU, so an account gets ``CONSOLE_THROTTLE_RATES["plan"]`` of them."""

    scope = "plan"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if isinstance(request.auth, ApiToken):
            return self.cache_format % {"scope": self.scope, "ident": f"token-{request.auth.pk}"}
        if request.user and request.user.is_authenticated:
            return self.cache_format % {"scope": self.scope, "ident": f"user-{request.user.pk}"}
        return None


def check_anonymous(request: HttpRequest) -> None:
    """Count one credential-less (or failed-credential) request of this address; raise
    ``Throttled`` once its rate is spent."""
    throttle = AnonymousRateThrottle()
    if not throttle.allow_request(cast(Request, request), cast("APIView", None)):
        raise exceptions.Throttled(wait=throttle.wait() or 1.0)


def throttled_response(exc: exceptions.Throttled) -> JsonResponse:
    """The 429 of a throttle refusal outside DRF's views (the middleware's)."""
    seconds: float | None = getattr(exc, "wait", None)
    wait = max(1, math.ceil(seconds)) if seconds is not None else 1
    body = {"code": "throttled", "detail": f"too many requests; retry in {wait} s", "fields": {}}
    response = JsonResponse(body, status=429)
    response["Retry-After"] = str(wait)
    return response
