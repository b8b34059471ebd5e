"""Request-scoped correlation id (``X-Request-ID`` in and out)."""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from console.tenancy.context import (
    clean_correlation_id,
    reset_correlation_id,
    set_correlation_id,
)


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
