"""Request-scoped correlation id (``X-Request-ID`` in and out), the anonymous API throttle and the
JSON error body for every /api/ error."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import Throttled

from console.tenancy.context import (
    clean_correlation_id,
    reset_correlation_id,
    set_correlation_id,
)
from console.tenancy.throttling import check_anonymous, throttled_response


class CorrelationIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        correlation_id = clean_correlation_id(request.headers.get("X-Request-ID"))
        request.correlation_id = correlation_id  # type: ignore[attr-defined]
        token = set_correlation_id(correlation_id)
        try:
            response = self.get_response(request)
        finally:
            reset_correlation_id(token)
        response["X-Request-ID"] = correlation_id
        return response


class AnonymousApiThrottleMiddleware:
    """Throttle /api/ requests that carry no credentials per client address, before DRF's
    permission check would answer them 401 without counting (requests with a bearer token are
    counted by the token authentication when the token fails)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            request.path_info.startswith("/api/")
            and "HTTP_AUTHORIZATION" not in request.META
            and not request.user.is_authenticated
        ):
            try:
                check_anonymous(request)
            except Throttled as exc:
                return throttled_response(exc)
        return self.get_response(request)


_API_ERROR_CODES = {
    400: "invalid",
    401: "not_authenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    429: "throttled",
}


class ApiErrorBodyMiddleware:
    """Every error answer under /api/ is the one JSON error body ``{"code","detail","fields"}``,
    whatever produced it: the resolver's 404 (also for paths such as ``%2f`` or undecodable
    ``%ff``), Django's CSRF or host checks, a debug page when DEBUG is on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and request.path_info.startswith("/api/")
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            status = response.status_code
            code = _API_ERROR_CODES.get(status, "server_error" if status >= 500 else "error")
            detail = "server error" if status >= 500 else (response.reason_phrase or "error").lower()
            replacement = JsonResponse({"code": code, "detail": detail, "fields": {}}, status=status)
            for header in ("Retry-After", "WWW-Authenticate", "Allow", "X-Request-ID"):
                if header in response:
                    replacement[header] = response[header]
            return replacement
        return response
