"""The error answers every operation can give, added to the OpenAPI document in one place.

Views declare their successes (and special refusals such as a reservation's 409 with the stored
rejection); this postprocessing hook adds the error statuses the platform produces around them,
each with the one error body (console.tenancy.api.errors):

- 401 (no or bad credentials), 403 (role), 404 (other tenants' objects, bad page numbers),
  429 (throttling) and 503 (database away, with ``Retry-After``) on every operation;
- 400 (invalid input, bad filters, unparsable JSON) on every operation: query parameters and
  bodies are validated everywhere;
- 409 (a conflict with existing data) on every write; 413 (body too large) and 415 (a body in a
  media type the operation does not parse) where there is a body;
- 422 (``idempotency_key_reused``) where the ``Idempotency-Key`` header is accepted.

A view's own schema for one of these statuses is kept and widened to also allow the error body.
"""

from __future__ import annotations

from typing import Any

ERROR_COMPONENT = "Error"
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The one error body of the API (docs/api.md, Errors).",
    "properties": {
        "code": {"type": "string", "description": "stable machine-readable code, e.g. invalid, not_found"},
        "detail": {"type": "string", "description": "for humans"},
        "fields": {
            "type": "object",
            "additionalProperties": {},
            "description": "per-field messages (400 invalid); empty otherwise",
        },
    },
    "required": ["code", "detail", "fields"],
}
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "seconds to wait before retrying"}}
DESCRIPTIONS = {
    "400": "Invalid input: the error body names the fields",
    "401": "Not authenticated, or the token is unknown, revoked or expired",
    "403": "The role does not allow this",
    "404": "Not found (other tenants' objects answer 404 too)",
    "409": "Conflicts with existing data or a concurrent request",
    "413": "The request body is too large",
    "415": "The request body's Content-Type is not one the operation accepts",
    "422": "The Idempotency-Key was used for a different request",
    "429": "Too many requests: retry after Retry-After seconds",
    "503": "The database was unavailable: retry after Retry-After seconds",
}
ALWAYS = ("400", "401", "403", "404", "429", "503")
WRITES = frozenset({"post", "put", "patch", "delete"})
METHODS = WRITES | {"get", "head", "options", "trace"}


def error_statuses(method: str, operation: dict[str, Any]) -> list[str]:
    """The error statuses ``operation`` can answer besides what its view declares."""
    statuses = list(ALWAYS)
    if method in WRITES:
        statuses.append("409")
    if "requestBody" in operation:
        statuses += ["413", "415"]
    if any(p.get("in") == "header" and p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
        statuses.append("422")
    return sorted(statuses)


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    components = result.setdefault("components", {})
    components.setdefault("schemas", {})[ERROR_COMPONENT] = ERROR_SCHEMA
    shared = components.setdefault("responses", {})
    ref = {"$ref": f"#/components/schemas/{ERROR_COMPONENT}"}
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in METHODS:
                continue
            responses = operation.setdefault("responses", {})
            for status in error_statuses(method, operation):
                if status in responses:
                    _widen(responses[status], ref)
                    continue
                shared.setdefault(f"Error{status}", _error_response(status, ref))
                responses[status] = {"$ref": f"#/components/responses/Error{status}"}
    return result


def _error_response(status: str, ref: dict[str, str]) -> dict[str, Any]:
    response: dict[str, Any] = {"description": DESCRIPTIONS[status], "content": {"application/json": {"schema": ref}}}
    if status in {"429", "503"}:
        response["headers"] = RETRY_AFTER
    return response


def _widen(declared: dict[str, Any], ref: dict[str, str]) -> None:
    """A view's own answer for an error status may also be the plain error body."""
    content = declared.setdefault("content", {}).setdefault("application/json", {})
    schema = content.get("schema")
    if schema is None:
        content["schema"] = ref
    elif schema != ref and not (isinstance(schema, dict) and ref in schema.get("anyOf", [])):
        content["schema"] = {"anyOf": [schema, ref]}
