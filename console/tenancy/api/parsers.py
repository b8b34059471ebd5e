"""JSON parsing with a size and a depth limit, in front of DRF's own.

Python's ``json`` recurses once per nesting level: ``"[" * 100000`` raised ``RecursionError``
inside DRF's ``JSONParser`` and answered 500. Here a body larger than
``DATA_UPLOAD_MAX_MEMORY_SIZE`` is refused before it is read (413), and one nested deeper than
``API_JSON_MAX_DEPTH`` before anything looks at its values (400); both with the one error body.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import exceptions, status
from rest_framework.parsers import JSONParser


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is too large"
    default_code = "too_large"


def max_body_bytes(view: object = None) -> int:
    """The body limit: the setting a view (or an action, ``@action(body_limit_setting=...)``) names
    in ``body_limit_setting``, else Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""
    own = getattr(view, "body_limit_setting", None)
    limit = getattr(settings, own) if own else settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return int(limit) if limit is not None else 2_621_440


def depth_of(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


class BoundedJSONParser(JSONParser):
    """``JSONParser`` that refuses oversized bodies (413) and deep nesting (400)."""

    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        context = parser_context or {}
        encoding = context.get("encoding", settings.DEFAULT_CHARSET)
        limit = max_body_bytes(context.get("view"))
        request = context.get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and str(declared).isdigit() and int(declared) > limit:
            raise RequestTooLarge(f"the request body is larger than {limit} bytes")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"the request body is larger than {limit} bytes")
        max_depth = int(settings.API_JSON_MAX_DEPTH)
        try:
            text = codecs.decode(raw, encoding)
            data = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError:
            raise exceptions.ParseError(f"JSON nested deeper than {max_depth} levels") from None
        except ValueError as exc:
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None
        if depth_of(data) > max_depth:
            raise exceptions.ParseError(f"JSON nested deeper than {max_depth} levels")
        return data


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; DRF's strict mode refuses them too.
    raise ValueError(f"{name} is not valid JSON")
