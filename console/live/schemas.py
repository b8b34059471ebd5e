"""Typed live messages: every message a live socket can receive, checked in tests.

Each server → client message is a JSON object with ``type``; stream messages also carry ``seq``
(per group, consecutive: a gap means something was dropped and the client resyncs from the REST
snapshot) and ``group``.
"""

from typing import Any, NotRequired, TypedDict


class LinkState(TypedDict):
    id: str
    up: bool
    bucket: int
    util: float
    tx_bps: int
    rx_bps: int
    errors: dict[str, int]
    error_totals: dict[str, int]
    xmit_wait: int  # congestion: PortXmitWait ticks per second


class LinkDelta(TypedDict):
    type: str  # "link.delta"
    group: str
    seq: int
    fabric: int
    at: float  # collector's wall clock when the counters were read
    links: list[LinkState]


class EventBody(TypedDict):
    id: int
    kind: str
    severity: str
    status: str
    subject: str
    message: str
    opened_at: str
    reservations: list[int]


class EventMessage(TypedDict):
    type: str  # "event"
    group: str
    seq: int
    fabric: int
    event: EventBody


class ChangeStepBody(TypedDict):
    seq: int
    name: str
    target: str
    status: str


class ChangeProgress(TypedDict):
    type: str  # "change.progress"
    group: str
    seq: int
    change: int
    fabric: int
    status: str
    steps: list[ChangeStepBody]
    error: NotRequired[str]


class NodePower(TypedDict):
    """A node's power state changed (console.telemetry.power.announce): operators' fabric group
    and the groups of the tenants holding the node. ``intended``: an operator's or the policy's
    doing (its links are down on purpose), false for ``failed``."""

    type: str  # "node.power"
    group: str
    seq: int
    fabric: int
    node: str
    node_id: int
    state: str  # on, powering-on, off, powering-off, failed
    since: str | None  # ISO 8601, UTC
    intended: bool


class Subscribed(TypedDict):
    type: str  # "subscribed"
    group: str
    seq: int


SCHEMAS: dict[str, type] = {
    "link.delta": LinkDelta,
    "event": EventMessage,
    "change.progress": ChangeProgress,
    "node.power": NodePower,
    "subscribed": Subscribed,
}
_NESTED: dict[tuple[str, str], type] = {
    ("link.delta", "links"): LinkState,
    ("event", "event"): EventBody,
    ("change.progress", "steps"): ChangeStepBody,
}
_PY = {int: (int,), float: (int, float), str: (str,), bool: (bool,), dict: (dict,), list: (list,)}


class SchemaError(ValueError):
    """A live message does not match its schema."""


def _check(obj: Any, schema: type, where: str) -> None:
    if not isinstance(obj, dict):
        raise SchemaError(f"{where}: expected an object")
    hints = schema.__annotations__
    optional: frozenset[str] = getattr(schema, "__optional_keys__", frozenset())
    missing = [k for k in hints if k not in obj and k not in optional]
    extra = [k for k in obj if k not in hints]
    if missing or extra:
        raise SchemaError(f"{where}: missing {missing}, unexpected {extra}")
    for key, value in obj.items():
        hint = hints[key]
        origin = getattr(hint, "__origin__", hint)
        if origin is NotRequired:
            origin = hint.__args__[0]
        origin = getattr(origin, "__origin__", origin)
        if isinstance(origin, type) and origin in _PY:
            if not isinstance(value, _PY[origin]) or (origin is int and isinstance(value, bool)):
                raise SchemaError(f"{where}.{key}: expected {origin.__name__}")


def check(message: dict[str, Any]) -> None:
    """Raise :class:`SchemaError` unless ``message`` matches the schema of its ``type``."""
    kind = message.get("type") if isinstance(message, dict) else None
    schema = SCHEMAS.get(kind or "")
    if schema is None:
        raise SchemaError(f"unknown live message type {kind!r}")
    _check(message, schema, kind or "")
    for (k, field), nested in _NESTED.items():
        if k != kind:
            continue
        value = message[field]
        for i, item in enumerate(value if isinstance(value, list) else [value]):
            _check(item, nested, f"{kind}.{field}[{i}]")
