"""Fabric and FabricPartition mutations: permission check, precise validation, change, audit.

Partition input is linted up front with the same rules OpenSM's file will be linted with
(P_Key range, duplicate keys and names, GUID format, membership keywords), so a bad partition is
refused with a precise error here instead of failing a push later. Setting a partition only
records desired state; the change request pushes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypeVar

from django.db import IntegrityError, models, transaction

from console.fabric.changes.locks import fabric_for_update, partition_for_update
from console.fabric.models import Fabric, FabricPartition
from console.fabric.opensm.lint import format_guid, parse_guid
from console.fabric.opensm.partitions import MAX_PKEY, MIN_PKEY, PORT_KEYWORDS
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid, NotFound
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator

_Row = TypeVar("_Row", bound=models.Model)

NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
MEMBERSHIPS = ("full", "limited", "both")
FABRIC_FIELDS = (
    "name",
    "description",
    "site",
    "driver",
    "revision",
    "config",
    "approval_required",
    "pkey_min",
    "pkey_max",
)


def parse_pkey(value: Any) -> int:
    """``0x0003``, ``3`` or ``"3"`` → 3, within 0x0001-0x7ffe (0x7fff is the Default rule)."""
    if isinstance(value, bool):
        value = None
    if isinstance(value, int):
        pkey = value
    elif isinstance(value, str) and re.fullmatch(r"0[xX][0-9a-fA-F]{1,4}", value.strip()):
        pkey = int(value.strip(), 16)
    elif isinstance(value, str) and value.strip().isdigit():
        pkey = int(value.strip())
    else:
        raise Invalid(f"P_Key {value!r} is not a number like 0x0003", fields={"pkey": ["format"]})
    if not MIN_PKEY <= pkey <= MAX_PKEY:
        detail = f"P_Key {pkey:#06x} outside 0x0001-0x7ffe"
        if pkey == 0x7FFF:
            detail = "P_Key 0x7fff is the Default partition, which the console manages itself"
        raise Invalid(detail, fields={"pkey": [detail]})
    return pkey


def parse_members(members: Iterable[Any]) -> list[list[str]]:
    """``["0x0002c9…=full", ["0x…", "limited"], {"guid": …, "membership": …}]`` → canonical.

    Every problem is reported, each with its position, in ``fields["members"]``.
    """
    out: list[list[str]] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(members):
        if isinstance(item, str):
            port, _, membership = item.partition("=")
        elif isinstance(item, list | tuple) and len(item) in (1, 2):
            port, membership = str(item[0]), str(item[1]) if len(item) == 2 else ""
        elif isinstance(item, dict) and "guid" in item:
            port, membership = str(item["guid"]), str(item.get("membership") or "")
        else:
            errors.append(f"member {i}: expected 'GUID[=full|limited]', got {item!r}")
            continue
        port, membership = port.strip(), (membership.strip() or "full")
        if port not in PORT_KEYWORDS:
            guid = parse_guid(port)
            if guid is None:
                errors.append(f"member {i}: {port!r} is not a port GUID (0x + 16 hex digits)")
                continue
            port = format_guid(guid)
        if membership not in MEMBERSHIPS:
            errors.append(f"member {i}: membership {membership!r} is not full, limited or both")
            continue
        if port in seen:
            errors.append(f"member {i}: {port} already listed as member {seen[port]}")
            continue
        seen[port] = i
        out.append([port, membership])
    if errors:
        raise Invalid(errors[0], fields={"members": errors})
    return sorted(out)


def _validate_name(name: Any) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        detail = f"partition name {name!r} must be 1-64 letters, digits, '_', '.' or '-'"
        raise Invalid(detail, fields={"name": [detail]})
    if name == "Default":
        raise Invalid("'Default' is the console's own rule", fields={"name": ["reserved"]})
    return name


def set_partition(
    actor: Actor,
    principal: Principal,
    fabric: Fabric,
    *,
    name: str,
    pkey: Any,
    members: Iterable[Any],
    sl: int = 0,
    ipoib: bool = False,
    indx0: bool | None = None,
) -> FabricPartition:
    """Create or update the manual partition ``name`` of ``fabric`` (desired state only).

    ``indx0`` (OpenSM's flag: the P_Key at index 0 of every member's table): None keeps what the
    partition has (off for a new one)."""
    require_operator(principal, to="change fabrics")
    name = _validate_name(name)
    key = parse_pkey(pkey)
    canonical = parse_members(members)
    if not isinstance(sl, int) or isinstance(sl, bool) or not 0 <= sl <= 15:
        raise Invalid(f"SL {sl!r} outside 0-15", fields={"sl": ["0-15"]})
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        row = FabricPartition.objects.filter(fabric=fabric, name=name).first()
        clash = FabricPartition.objects.filter(fabric=fabric, pkey=key).exclude(name=name).first()
        if clash is not None:
            detail = f"P_Key {key:#06x} is already partition {clash.name!r}"
            raise Conflict(detail, fields={"pkey": [detail]})
        if row is not None and row.source != FabricPartition.Source.MANUAL:
            raise Conflict(f"partition {name!r} belongs to a reservation", fields={"name": [name]})
        values = {"pkey": key, "members": canonical, "sl": sl, "ipoib": bool(ipoib)}
        if indx0 is not None:
            values["indx0"] = bool(indx0)
        row = save_audited(
            actor,
            FabricPartition,
            row,
            keys={"fabric": fabric, "name": name},
            values=values,
            action="fabric.partition",
            conflict=f"partition {name!r} or P_Key {key:#06x} exists",
        )
    return row


def save_audited(
    actor: Actor,
    model: type[_Row],
    row: _Row | None,
    *,
    keys: dict[str, Any],
    values: dict[str, Any],
    action: str,
    conflict: str,
) -> _Row:
    """Create (``keys`` + ``values``) or update (``values``) one desired-state row, audited as
    ``<action>.create`` / ``<action>.update``; a concurrent duplicate is a 409 ``conflict``."""
    before = audit.snapshot(row) if row is not None else None
    try:
        with transaction.atomic():
            if row is None:
                row = model._default_manager.create(**keys, **values)  # objects, the only manager
            else:
                for field, value in values.items():
                    setattr(row, field, value)
                row.save()
    except IntegrityError as exc:
        raise Conflict(conflict) from exc
    suffix = "create" if before is None else "update"
    audit.record(actor, f"{action}.{suffix}", row, before=before, after=audit.snapshot(row))
    return row


def delete_partition(actor: Actor, principal: Principal, fabric: Fabric, *, name: str) -> None:
    """Remove the manual partition ``name`` from the desired state of ``fabric``."""
    require_operator(principal, to="change fabrics")
    with transaction.atomic():
        row = partition_for_update(fabric, name)
        if row is None:
            raise NotFound(f"fabric {fabric.name!r} has no partition {name!r}")
        if row.source != FabricPartition.Source.MANUAL:
            raise Conflict(f"partition {name!r} belongs to a reservation")
        audit.record(actor, "fabric.partition.delete", row, before=audit.snapshot(row))
        row.delete()


def _validate_fabric(values: dict[str, Any]) -> None:
    low, high = values.get("pkey_min"), values.get("pkey_max")
    if low is not None and high is not None and not 1 <= low <= high <= MAX_PKEY:
        detail = "P_Key range must satisfy 0x0001 ≤ pkey_min ≤ pkey_max ≤ 0x7ffe"
        raise Invalid(detail, fields={"pkey_min": [detail], "pkey_max": [detail]})
    if "config" in values and not isinstance(values["config"], dict):
        raise Invalid("config must be an object", fields={"config": ["object"]})


def create_fabric(actor: Actor, principal: Principal, **values: Any) -> Fabric:
    """Register a fabric bound to a design revision."""
    require_operator(principal, to="change fabrics")
    values = {k: v for k, v in values.items() if k in FABRIC_FIELDS}
    _validate_fabric({"pkey_min": 0x0100, "pkey_max": 0x7FFE, **values})
    try:
        with transaction.atomic():
            fabric = Fabric.objects.create(**values)
            audit.record(actor, "fabric.create", fabric, after=audit.snapshot(fabric))
    except IntegrityError as exc:
        raise Conflict(f"a fabric named {values.get('name')!r} exists") from exc
    return fabric


def update_fabric(actor: Actor, principal: Principal, fabric: Fabric, **values: Any) -> Fabric:
    """Change a fabric's settings (name, driver, config, approval, P_Key range …)."""
    require_operator(principal, to="change fabrics")
    try:
        with transaction.atomic():
            fabric = fabric_for_update(fabric.pk)
            before = audit.snapshot(fabric)
            for key, value in values.items():
                if key in FABRIC_FIELDS:
                    setattr(fabric, key, value)
            _validate_fabric({"pkey_min": fabric.pkey_min, "pkey_max": fabric.pkey_max, "config": fabric.config})
            fabric.save()
            audit.record(actor, "fabric.update", fabric, before=before, after=audit.snapshot(fabric))
    except IntegrityError as exc:
        raise Conflict("another fabric has that name") from exc
    return fabric


def delete_fabric(actor: Actor, principal: Principal, fabric: Fabric) -> None:
    """Forget a fabric (its partitions, changes and discoveries go with it)."""
    require_operator(principal, to="change fabrics")
    with transaction.atomic():
        busy = fabric.changes.filter(status__in=["queued", "applying", "verifying"]).exists()
        if busy:
            raise Conflict(f"fabric {fabric.name!r} has a change in progress")
        audit.record(actor, "fabric.delete", fabric, before=audit.snapshot(fabric))
        fabric.delete()
