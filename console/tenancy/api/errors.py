"""One error body for every 4xx, and for a 503 when the database went away under the request:
``{"code", "detail", "fields"}``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, InterfaceError, OperationalError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from console.tenancy.api.parsers import RequestTooLarge
from console.tenancy.errors import ConsoleError


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {str(k): _flatten(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return [_flatten(v) for v in detail]
    return str(detail)


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, ConsoleError):
        headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
        return Response(exc.as_dict(), status=exc.status, headers=headers)
    if isinstance(exc, DjangoValidationError):
        fields = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(fields)
    if isinstance(exc, IntegrityError):
        return Response(
            {"code": "conflict", "detail": "the change conflicts with existing data", "fields": {}},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, OperationalError | InterfaceError):
        # The database went away under the request (a killed connection, a failover): its open
        # transaction was rolled back, and the next request gets a fresh connection.
        return Response(
            {"code": "unavailable", "detail": "the database was unavailable; retry", "fields": {}},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "1"},
        )
    # Django's own body limits (form and multipart bodies; JSON is bounded by BoundedJSONParser).
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge(f"the request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes")
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        exc = exceptions.ParseError(str(exc))
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        if not isinstance(fields, dict):
            fields = {"non_field_errors": fields}
        first = next(iter(fields.items()), None)
        detail = "invalid input"
        if first is not None:
            message = first[1][0] if isinstance(first[1], list) and first[1] else first[1]
            detail = f"{first[0]}: {message}"
        response.data = {"code": "invalid", "detail": detail, "fields": fields}
        return response
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        response.data = {"code": code, "detail": _flatten(exc.detail), "fields": {}}
    return response
