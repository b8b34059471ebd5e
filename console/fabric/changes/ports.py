"""Switch port administration: permission check, precise validation, desired state, audit.

A ``PortAdminState`` row says how the operator wants one switch port: enabled or disabled
(isolate a bad cable, shut an unused port) and, optionally, its enabled link width and speed as
ibportstate codes. Input is checked against the fabric's design revision (the switch must be one
of its switches, the port within that switch's port count) so a typo is refused here instead of
failing a push later. Setting a port only records desired state; a change request pushes it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.fabric.changes.locks import fabric_for_update, port_admin_for_update
from console.fabric.changes.partitions import save_audited
from console.fabric.drivers.base import SPEED_NAMES, WIDTH_NAMES
from console.fabric.models import Fabric, PortAdminState
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Invalid, NotFound
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator
from designer.errors import DesignerError
from designer.services import revision_graph

WIDTH_CHOICES = ", ".join(f"{name} ({code})" for code, name in WIDTH_NAMES.items())
SPEED_CHOICES = ", ".join(f"{name.split()[0]} ({code})" for code, name in SPEED_NAMES.items())


def _design_switches(fabric: Fabric) -> dict[str, int]:
    """Switch name → port count in the fabric's design revision ({} when it has no graph)."""
    try:
        graph = revision_graph(fabric.revision)
    except (DesignerError, KeyError, TypeError, ValueError):
        return {}
    return {name: graph.port_count(name) for name in graph.switches}


def parse_width(value: Any) -> int | None:
    """``"1X"`` (any case) or its ibportstate code ``1`` → 1; None/"" → None (not managed)."""
    if value is None or value == "" or (isinstance(value, str) and value.lower() == "none"):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value in WIDTH_NAMES:
        return value
    if isinstance(value, str):
        by_name = {name.lower(): code for code, name in WIDTH_NAMES.items()}
        code = by_name.get(value.strip().lower())
        if code is not None:
            return code
    detail = f"link width {value!r} is not one of {WIDTH_CHOICES}"
    raise Invalid(detail, fields={"width": [detail]})


def parse_speed(value: Any) -> int | None:
    """``"2.5"``, ``"2.5 Gbps"`` or ``5.0`` (Gbps), or an ibportstate code (int 1, 2, 4)."""
    if value is None or value == "" or (isinstance(value, str) and value.lower() == "none"):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value in SPEED_NAMES:
            return value
    elif isinstance(value, float | str):
        text = str(value).strip().lower().removesuffix("gbps").strip()
        try:
            gbps = float(text)
        except ValueError:
            gbps = None
        for code, name in SPEED_NAMES.items():
            if gbps is not None and float(name.split()[0]) == gbps:
                return code
    detail = f"link speed {value!r} is not one of {SPEED_CHOICES} Gbps"
    raise Invalid(detail, fields={"speed": [detail]})


def _parse_port(value: Any) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool):
        detail = f"port {value!r} is not a port number"
        raise Invalid(detail, fields={"port": [detail]})
    return value


def _check_port(fabric: Fabric, switch: Any, port: Any) -> tuple[str, int]:
    """The switch must be in the fabric's design and the port within its port count."""
    if not isinstance(switch, str) or not switch.strip():
        raise Invalid("switch name is required", fields={"switch": ["required"]})
    switch = switch.strip()
    number = _parse_port(port)
    switches = _design_switches(fabric)
    if switch not in switches:
        known = sorted(switches)
        shown = ", ".join(known[:8]) + (f" … ({len(known)} in all)" if len(known) > 8 else "")
        detail = (
            f"switch {switch!r} is not in the design of fabric {fabric.name!r}"
            f" (revision {fabric.revision_id}): "
            + (f"its switches are {shown}" if known else "the revision has no switches")
        )
        raise Invalid(detail, fields={"switch": [detail]})
    count = switches[switch]
    if not 1 <= number <= count:
        detail = f"{switch} has no port {number}: ports are 1..{count}"
        raise Invalid(detail, fields={"port": [detail]})
    return switch, number


def set_port_admin(
    actor: Actor,
    principal: Principal,
    fabric: Fabric,
    *,
    switch: Any,
    port: Any,
    enabled: bool = True,
    width: Any = None,
    speed: Any = None,
    reason: str = "",
) -> PortAdminState:
    """Create or update how ``switch[port]`` of ``fabric`` should be (desired state only).

    ``width``/``speed``: a name (``"1X"``, ``"2.5"``) or an ibportstate code; None leaves the
    port's own setting alone.
    """
    require_operator(principal, to="change fabrics")
    switch, number = _check_port(fabric, switch, port)
    if not isinstance(enabled, bool):
        raise Invalid(f"enabled {enabled!r} is not true or false", fields={"enabled": ["bool"]})
    width_code, speed_code = parse_width(width), parse_speed(speed)
    if (width_code or speed_code) and fabric.driver == Fabric.Driver.UFM:
        detail = "link width/speed are set over SMPs; the UFM driver does not set them"
        field = "width" if width_code else "speed"
        raise Invalid(detail, fields={field: [detail]})
    reason = "" if reason is None else str(reason)
    if len(reason) > 200:
        raise Invalid("reason is longer than 200 characters", fields={"reason": ["max 200"]})
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        row = PortAdminState.objects.filter(fabric=fabric, switch=switch, port=number).first()
        values = {"enabled": enabled, "width": width_code, "speed": speed_code, "reason": reason}
        row = save_audited(
            actor,
            PortAdminState,
            row,
            keys={"fabric": fabric, "switch": switch, "port": number},
            values=values,
            action="fabric.port",
            conflict=f"{switch}[{number}] is already administered",
        )
    return row


def clear_port_admin(actor: Actor, principal: Principal, fabric: Fabric, *, switch: str, port: Any) -> None:
    """Stop administering ``switch[port]``: it leaves the desired state (the port keeps what it
    has on the wire; set it enabled first to bring it back up)."""
    require_operator(principal, to="change fabrics")
    number = _parse_port(port)
    with transaction.atomic():
        row = port_admin_for_update(fabric, switch, number)
        if row is None:
            raise NotFound(f"fabric {fabric.name!r} does not administer {switch}[{number}]")
        audit.record(actor, "fabric.port.delete", row, before=audit.snapshot(row))
        row.delete()
