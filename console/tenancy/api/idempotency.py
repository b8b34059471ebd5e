"""``@idempotent``: the ``Idempotency-Key`` header on a viewset's write action (see
console.tenancy.idempotency for the guarantees)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from console.tenancy import idempotency
from console.tenancy.api.base import PrincipalMixin

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    idempotency.HEADER,
    OpenApiTypes.STR,
    location=OpenApiParameter.HEADER,
    required=False,
    description=(
        "Any unique string (a UUID) per attempt: a retry with the same key gets the first answer "
        "(header `Idempotent-Replayed: true`) and changes nothing; the same key with another body "
        "answers 422. Keys expire after `IDEMPOTENCY_KEY_TTL_HOURS` (default 24)."
    ),
)

Handler = Callable[..., Response]


def _body(request: Request) -> Any:
    data = request.data
    return dict(data.lists()) if hasattr(data, "lists") else data


def idempotent(handler: Handler) -> Handler:
    """Make a write action answer retries carrying the same ``Idempotency-Key`` only once.

    Goes above ``@action`` (which would replace the schema override this adds) and below
    ``@extend_schema``.
    """

    @functools.wraps(handler)
    def wrapper(view: PrincipalMixin, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = request.headers.get(idempotency.HEADER)
        if key is None:
            return handler(view, request, *args, **kwargs)
        produced: list[Response] = []

        def call() -> idempotency.Answer:
            response = handler(view, request, *args, **kwargs)
            produced.append(response)
            return idempotency.Answer(response.status_code, response.data)

        answer = idempotency.answer_once(
            view.principal,
            key,
            idempotency.fingerprint(request.method or "", request.path, _body(request)),
            call,
        )
        if produced:
            return produced[0]
        return Response(answer.body, status=answer.status, headers={"Idempotent-Replayed": "true"})

    return extend_schema(parameters=[IDEMPOTENCY_KEY_PARAMETER])(wrapper)
