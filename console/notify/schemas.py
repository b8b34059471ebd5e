"""The JSON Schema of every event's payload (docs/api.md, "Notifications", shows the same ones).

Every payload is an envelope ``{id, type, created_at, tenant, data}``; ``data`` differs per type.
Nothing in it names another tenant: the reservation is the tenant's own, nodes are its own.
"""

from __future__ import annotations

from typing import Any

_TIME = {"type": "string", "format": "date-time"}

RESERVATION: dict[str, Any] = {
    "type": "object",
    "required": ["id", "name", "status", "pool", "gpus", "nodes", "start", "end"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "status": {"type": "string"},
        "pool": {"type": "string"},
        "gpus": {"type": "integer", "minimum": 0},
        "nodes": {"type": "array", "items": {"type": "string"}},
        "start": _TIME,
        "end": _TIME,
    },
}


def _data(extra: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    properties: dict[str, Any] = {"reservation": RESERVATION} | (extra or {})
    return {
        "type": "object",
        "required": ["reservation", *required],
        "additionalProperties": False,
        "properties": properties,
    }


#: What a ``reservation.fabric_fault`` can be about: telemetry's alarm kinds (a failed push is
#: ``reservation.failed`` instead), a node down, a port the health policy isolated.
FAULT_KINDS = (
    "link_down",
    "link_errors",
    "link_flapping",
    "routing_fallback",
    "sm_state",
    "sm_takeover",
    "member_absent",
    "isolation_leak",
    "config_drift",
    "agent_silent",
    "wire_drift",
    "node_down",
    "port_isolated",
)

DATA: dict[str, dict[str, Any]] = {
    "reservation.ready": _data({"ready_at": _TIME}, ("ready_at",)),
    "reservation.expiring": _data(
        {"expires_at": _TIME, "lead_s": {"type": "integer", "minimum": 0}}, ("expires_at", "lead_s")
    ),
    "reservation.preempted": _data({"reason": {"type": "string"}}, ("reason",)),
    "reservation.failed": _data({"error": {"type": "string"}}, ("error",)),
    "reservation.placed": _data({"waited_s": {"type": "integer", "minimum": 0}}, ("waited_s",)),
    "reservation.fabric_fault": _data(
        {
            "fault": {
                "type": "object",
                "required": ["kind", "severity", "message", "opened_at"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"enum": list(FAULT_KINDS)},
                    "severity": {"enum": ["info", "warning", "critical"]},
                    "message": {"type": "string", "description": "the cause, in words"},
                    "opened_at": _TIME,
                    "port": {"type": "string", "description": "the switch port (switch/port), for a port's fault"},
                    "action": {"type": "string", "description": "what the console did about it"},
                },
            }
        },
        ("fault",),
    ),
    "webhook.test": {
        "type": "object",
        "required": ["message"],
        "additionalProperties": False,
        "properties": {"message": {"type": "string"}},
    },
}


def schema_for(event_type: str) -> dict[str, Any]:
    """The full JSON Schema (draft 2020-12) of an event of ``event_type``."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": event_type,
        "type": "object",
        "required": ["id", "type", "created_at", "tenant", "data"],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "format": "uuid"},
            "type": {"const": event_type},
            "created_at": _TIME,
            "tenant": {
                "type": "object",
                "required": ["id", "slug"],
                "additionalProperties": False,
                "properties": {"id": {"type": "integer"}, "slug": {"type": "string"}},
            },
            "data": DATA[event_type],
        },
    }
