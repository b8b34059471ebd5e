"""Fabric and FabricPartition mutations: permission check, precise validation, change, audit.

Partition input is linted up front with the same rules OpenSM's file will be linted with
(P_Key range, duplicate keys and names, GUID format, membership keywords), so a bad partition is
refused with a precise error here instead of failing a push later. Setting a partition only
records desired state; the change request pushes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import IntegrityError, models, transaction

from console.fabric.changes.adopt import members_of
from console.fabric.changes.desired import build_desired
from console.fabric.changes.locks import fabric_for_update, partition_for_update
from console.fabric.changes.ownership import refusal
from console.fabric.models import Fabric, FabricPartition
from console.fabric.opensm.lint import format_guid, parse_guid
from console.fabric.opensm.partitions import MAX_PKEY, MIN_PKEY, PORT_KEYWORDS
from console.fabric.opensm.partitions_live import read_live
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid, NotFound
from console.tenancy.models import Principal, Tenant
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
    service: ServiceAccess | None = None,
) -> FabricPartition:
    """Create or update the manual partition ``name`` of ``fabric`` (desired state only).

    ``indx0`` (OpenSM's flag: the P_Key at index 0 of every member's table): None keeps what the
    partition has (off for a new one). With ``service`` it is a service partition: ``members``
    are the service hosts (full) and the reservations of the allowed tenants join as limited
    members. A partition that would let two tenants' hosts talk is refused, the pair named."""
    require_operator(principal, to="change fabrics")
    name = _validate_name(name)
    key = parse_pkey(pkey)
    canonical = parse_members(members)
    if not isinstance(sl, int) or isinstance(sl, bool) or not 0 <= sl <= 15:
        raise Invalid(f"SL {sl!r} outside 0-15", fields={"sl": ["0-15"]})
    kind = FabricPartition.Source.SERVICE if service is not None else FabricPartition.Source.MANUAL
    if service is not None:
        canonical = [[port, "full"] for port, _ in canonical]  # service hosts are full members
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        row = FabricPartition.objects.filter(fabric=fabric, name=name).first()
        clash = FabricPartition.objects.filter(fabric=fabric, pkey=key).exclude(name=name).first()
        if clash is not None:
            detail = f"P_Key {key:#06x} is already partition {clash.name!r}"
            raise Conflict(detail, fields={"pkey": [detail]})
        if row is not None and row.source != kind:
            raise Conflict(f"partition {name!r} is a {row.get_source_display()} partition", fields={"name": [name]})
        values: dict[str, Any] = {"pkey": key, "members": canonical, "sl": sl, "ipoib": bool(ipoib), "source": kind}
        if indx0 is not None:
            values["indx0"] = bool(indx0)
        if service is not None:
            values["description"] = service.description[:200]
        extra = None
        if service is not None:
            had = sorted(row.allowed_tenants.values_list("pk", flat=True)) if row is not None else []
            extra = ({"allowed_tenants": had}, {"allowed_tenants": list(service.tenants)})
        row = save_audited(
            actor,
            FabricPartition,
            row,
            keys={"fabric": fabric, "name": name},
            values=values,
            action="fabric.partition",
            conflict=f"partition {name!r} or P_Key {key:#06x} exists",
            extra=extra,
        )
        if service is not None:
            row.allowed_tenants.set(service.tenants)
        why = refusal(fabric, build_desired(fabric))
        if why is not None:
            raise Conflict(why, fields={"members": [why]}, code="isolation")
    return row


@dataclass(frozen=True)
class ServiceAccess:
    """Who may reach a service partition's hosts: tenants by id (their reservations' hosts join
    as limited members) and what the service is."""

    tenants: tuple[int, ...]
    description: str = ""


def service_access(tenants: Any, description: Any = "") -> ServiceAccess:
    """``tenants``: ids or slugs of existing tenants; every unknown one is a 400 naming it."""
    if not isinstance(tenants, list | tuple):
        raise Invalid("allowed_tenants must be a list of tenant ids or slugs", fields={"allowed_tenants": ["list"]})
    found: list[int] = []
    unknown = []
    for item in tenants:
        query = Tenant.objects.filter(pk=item) if isinstance(item, int) and not isinstance(item, bool) else None
        if query is None and isinstance(item, str):
            query = Tenant.objects.filter(slug=item)
        pk = query.values_list("pk", flat=True).first() if query is not None else None
        if pk is None:
            unknown.append(str(item))
        else:
            found.append(pk)
    if unknown:
        detail = f"no tenant {', '.join(unknown)}"
        raise Invalid(detail, fields={"allowed_tenants": [detail]})
    return ServiceAccess(tuple(sorted(set(found))), str(description or ""))


def save_audited(
    actor: Actor,
    model: type[_Row],
    row: _Row | None,
    *,
    keys: dict[str, Any],
    values: dict[str, Any],
    action: str,
    conflict: str,
    extra: tuple[dict[str, Any], dict[str, Any]] | None = None,
) -> _Row:
    """Create (``keys`` + ``values``) or update (``values``) one desired-state row, audited as
    ``<action>.create`` / ``<action>.update``; a concurrent duplicate is a 409 ``conflict``.
    ``extra``: (before, after) of what the row's snapshot does not hold (its relations)."""
    before = audit.snapshot(row) if row is not None else None
    if before is not None and extra is not None:
        before.update(extra[0])
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
    after = audit.snapshot(row)
    if extra is not None:
        after.update(extra[1])
    audit.record(actor, f"{action}.{suffix}", row, before=before, after=after)
    return row


def set_operator_partition(
    actor: Actor, principal: Principal, fabric: Fabric, *, name: str, raw: Any
) -> FabricPartition:
    """Replace the text of the operator-owned partition ``name`` (kept as written on every
    push). The text must read, as OpenSM reads it, to one P_Key that no other partition has."""
    require_operator(principal, to="change fabrics")
    if not isinstance(raw, str) or not raw.strip():
        raise Invalid("raw must be the partition's text, as partitions.conf takes it", fields={"raw": ["text"]})
    found = read_live(raw)
    if found.problems:
        detail = f"OpenSM would not read it: {found.problems[0]}"
        raise Invalid(detail, fields={"raw": [str(p) for p in found.problems]})
    keys = {st.pkey for st in found.statements}
    if len(keys) != 1 or None in keys:
        raise Invalid("the text must define one partition with its P_Key", fields={"raw": ["one P_Key"]})
    key = keys.pop()
    assert key is not None
    with transaction.atomic():
        fabric_for_update(fabric.pk)
        row = partition_for_update(fabric, name)
        if row is None:
            raise NotFound(f"fabric {fabric.name!r} has no partition {name!r}")
        if row.source != FabricPartition.Source.OPERATOR or row.removed:
            raise Conflict(f"partition {name!r} is not an operator-owned partition", fields={"name": [name]})
        clash = FabricPartition.objects.filter(fabric=fabric, pkey=key).exclude(pk=row.pk).first()
        if clash is not None:
            raise Conflict(f"P_Key {key:#06x} is already partition {clash.name!r}", fields={"raw": [f"{key:#06x}"]})
        text = raw if raw.endswith("\n") else raw + "\n"
        values = {"raw": text, "pkey": key, "members": members_of(text)}
        return save_audited(
            actor, FabricPartition, row, keys={}, values=values, action="fabric.partition", conflict="P_Key taken"
        )


def delete_partition(actor: Actor, principal: Principal, fabric: Fabric, *, name: str) -> None:
    """Remove the manual partition ``name`` from the desired state of ``fabric``."""
    require_operator(principal, to="change fabrics")
    with transaction.atomic():
        row = partition_for_update(fabric, name)
        if row is None:
            raise NotFound(f"fabric {fabric.name!r} has no partition {name!r}")
        if row.source == FabricPartition.Source.RESERVATION:
            raise Conflict(f"partition {name!r} belongs to a reservation")
        audit.record(actor, "fabric.partition.delete", row, before=audit.snapshot(row))
        if row.source == FabricPartition.Source.OPERATOR:
            # The next verified push drops it from the SM host's file; the row goes then.
            row.removed = True
            row.save(update_fields=["removed", "updated_at"])
        else:
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
