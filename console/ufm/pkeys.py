"""P_Keys as a UFM client sees them, and every change it asks for as an audited change request.

A P_Key is one of three things on a console fabric:

- an operator-owned partition (``FabricPartition``, source manual): UFM semantics — adding GUIDs
  to an unknown P_Key creates it (named ``api_pkey_0x…`` as UFM names them), setting replaces its
  GUIDs, removing GUIDs may leave it empty, deleting removes it. Only operators change them.
- a reservation's partition (scheduling's, carried through :mod:`console.fabric.hooks`):
  protected. Only the reservation's tenant (and operators and auditors) can see it; another tenant
  gets 404. Its tenant may add virtual GUIDs (pod VFs) from the reservation's vGUID range
  (:func:`console.fabric.services.vguid_range`, ib-kubernetes's GUID pool) and remove them again;
  its hosts' port GUIDs are members already. Nobody deletes it, sets its list or removes its hosts'
  GUIDs through this API; a GUID neither of its hosts nor in its range is refused (403).
- Default (0x7fff): the console's own rule, refused.

Every accepted mutation goes through :mod:`console.fabric.changes` (permission check, lint,
audit) and a change request; the call returns once that change is verified on the ports
(:func:`push_and_wait`). A repeat that changes nothing creates no change and answers at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from console.fabric import changes
from console.fabric.changes.desired import applied_of, build_desired
from console.fabric.changes.requests import OPEN
from console.fabric.hooks import requested_partitions
from console.fabric.models import ChangeRequest, Fabric, FabricPartition
from console.fabric.opensm.lint import format_guid
from console.fabric.opensm.lint import parse_guid as parse_console_guid
from console.fabric.opensm.vguids import is_virtual
from console.fabric.services import vguid_prefix, vguid_range
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Principal
from console.ufm.wire import NAME_PREFIX, GuidsRequest, UfmError, pkey_body, ufm_guid, ufm_pkey
from scheduling.models import ReservationSubnet
from scheduling.services.virtual_guids import change_virtual_guids, outside_range

Status = ChangeRequest.Status


@dataclass(frozen=True)
class PkeyView:
    """One P_Key as this API shows it."""

    pkey: int
    name: str
    ip_over_ib: bool
    members: tuple[tuple[int, str], ...]  # (GUID, full|limited)
    reservation_id: int | None = None
    tenant_id: int | None = None
    index0: bool = False

    def body(self, *, guids_data: bool) -> dict[str, Any]:
        return pkey_body(self.name, self.ip_over_ib, self.members, guids_data=guids_data, index0=self.index0)


def _members(raw: list[list[str]]) -> tuple[tuple[int, str], ...]:
    """Console members → (GUID, UFM membership); OpenSM keywords (ALL, SELF …) are no GUIDs."""
    out = []
    for port, membership in raw:
        guid = parse_console_guid(str(port))
        if guid is not None:
            out.append((guid, "limited" if membership == "limited" else "full"))
    return tuple(sorted(out))


def all_pkeys(fabric: Fabric) -> dict[int, PkeyView]:
    """Every P_Key of ``fabric``'s desired state except Default: operators' and reservations'."""
    views = {
        row.pkey: PkeyView(row.pkey, row.name, row.ipoib, _members(row.members), index0=row.indx0)
        for row in FabricPartition.objects.filter(fabric=fabric)
    }
    for req in requested_partitions(fabric.pk):
        views[int(req["pkey"])] = PkeyView(
            int(req["pkey"]),
            req["name"],
            False,
            _members(req["members"]),
            reservation_id=req["reservation_id"],
            tenant_id=req["tenant_id"],
        )
    return views


def visible_pkeys(principal: Principal, fabric: Fabric) -> dict[int, PkeyView]:
    """What ``principal`` may see: everything for operators and auditors; a tenant its own
    reservations' P_Keys only (nothing that names, or belongs to, another tenant)."""
    views = all_pkeys(fabric)
    if principal.sees_all_tenants:
        return views
    return {k: v for k, v in views.items() if v.tenant_id is not None and v.tenant_id == principal.tenant_id}


def get_pkey(principal: Principal, fabric: Fabric, pkey: int) -> PkeyView:
    view = visible_pkeys(principal, fabric).get(pkey)
    if view is None:
        raise UfmError(404, f"pkey {ufm_pkey(pkey)} not found")
    return view


@dataclass(frozen=True)
class Owner:
    """The reservation a P_Key belongs to, and the port GUIDs of its hosts (virtual ones apart)."""

    reservation_id: int
    tenant_id: int
    hosts: frozenset[int]


def _reservation_pkey(fabric: Fabric, pkey: int) -> Owner | None:
    """The reservation whose P_Key this is, while it may be on the wire (a reservation winding
    down has no hosts any more: nothing may be added to it)."""
    for req in requested_partitions(fabric.pk):
        if int(req["pkey"]) == pkey:
            prefix = vguid_prefix()
            hosts = frozenset(g for g, _ in _members(req["members"]) if not is_virtual(g, prefix))
            return Owner(req["reservation_id"], req["tenant_id"], hosts)
    live = (
        ReservationSubnet.objects.filter(fabric=fabric, pkey=pkey, pkey_live=True)
        .values_list("reservation_id", "reservation__tenant_id")
        .first()
    )
    return Owner(live[0], live[1], frozenset()) if live else None


def _check_owner(principal: Principal, owner: Owner, pkey: int) -> None:
    """Another tenant's reservation P_Key does not exist for you (404)."""
    if not principal.sees_all_tenants and principal.tenant_id != owner.tenant_id:
        raise UfmError(404, f"pkey {ufm_pkey(pkey)} not found")


def _writable_row(principal: Principal, fabric: Fabric, pkey: int, *, verb: str) -> FabricPartition | None:
    """The operator-owned partition ``pkey`` (None if there is none yet), after the protection
    rules: one's own reservation P_Key, or any reservation P_Key for an operator, is protected
    (403); for a tenant every other P_Key does not exist (404), another tenant's reservation's and
    a free one alike: a different answer would let a tenant find its neighbours' keys by guessing."""
    owner = _reservation_pkey(fabric, pkey)
    if owner is not None:
        _check_owner(principal, owner, pkey)
        raise UfmError(
            403,
            f"pkey {ufm_pkey(pkey)} belongs to reservation {owner.reservation_id}: its GUIDs follow the "
            f"reservation's hosts and it cannot be {verb} through this API",
        )
    if not (principal.is_operator and principal.can_write):
        if principal.sees_all_tenants:
            raise UfmError(403, "auditors have read-only access")
        raise UfmError(404, f"pkey {ufm_pkey(pkey)} not found")  # (as another tenant's: _check_owner)
    return FabricPartition.objects.filter(fabric=fabric, pkey=pkey).first()


def _save(
    actor: Actor, principal: Principal, fabric: Fabric, row: FabricPartition | None, pkey: int, **values: Any
) -> bool:
    """Write the operator partition through the console's service; True when anything changed.
    Members that are OpenSM keywords (``ALL``, ``SELF`` …), which UFM clients cannot name, stay."""
    name = row.name if row is not None else values.get("name") or f"{NAME_PREFIX}{ufm_pkey(pkey)}"
    indx0 = values.get("indx0")
    keywords = [list(m) for m in (row.members if row is not None else []) if parse_console_guid(str(m[0])) is None]
    members = sorted([[format_guid(g), m] for g, m in values["members"].items()] + keywords)
    ipoib = bool(values["ipoib"])
    if row is not None and sorted(row.members) == members and row.ipoib == ipoib and indx0 in (None, row.indx0):
        return False
    try:
        changes.set_partition(
            actor,
            principal,
            fabric,
            name=name,
            pkey=pkey,
            members=members,
            sl=row.sl if row is not None else 0,
            ipoib=ipoib,
            indx0=indx0,
        )
    except ConsoleError as exc:
        raise UfmError(exc.status, exc.detail) from exc
    return True


def _current(row: FabricPartition | None) -> dict[int, str]:
    """GUID → membership as stored (``both`` included) of an operator partition."""
    out: dict[int, str] = {}
    for port, membership in row.members if row is not None else []:
        guid = parse_console_guid(str(port))
        if guid is not None:
            out[guid] = str(membership)
    return out


def add_guids(actor: Actor, principal: Principal, fabric: Fabric, req: GuidsRequest) -> ChangeRequest | None:
    """``POST resources/pkeys``: add GUIDs (creating the P_Key if it does not exist).

    ``index0`` true sets OpenSM's ``indx0`` on an operator partition (false leaves it as it is:
    OpenSM's flag is per P_Key, not per GUID). A reservation's P_Key: see :func:`add_to_reservation`.
    """
    owner = _reservation_pkey(fabric, req.pkey)
    if owner is not None:
        return add_to_reservation(actor, principal, fabric, owner, req)
    row = _writable_row(principal, fabric, req.pkey, verb="changed")
    members = {**_current(row), **req.members}
    indx0 = True if req.index0 else None
    _save(actor, principal, fabric, row, req.pkey, members=members, ipoib=req.ip_over_ib, indx0=indx0)
    return push_and_wait(actor, principal, fabric, f"UFM API: add {len(req.members)} GUIDs to {ufm_pkey(req.pkey)}")


def _range_text(reservation_id: int) -> str:
    owned = vguid_range(reservation_id)
    return f"{owned.start}-{owned.end}" if owned is not None else "none (vGUID space exhausted)"


def add_to_reservation(
    actor: Actor, principal: Principal, fabric: Fabric, owner: Owner, req: GuidsRequest
) -> ChangeRequest | None:
    """Add GUIDs to a reservation's P_Key. Its hosts' port GUIDs are members already (nothing to
    change, for its tenant or an operator); every other GUID must be a virtual GUID of the
    reservation's range and the caller its tenant, or the call is refused (403). ``index0`` and
    ``ip_over_ib`` do not change a reservation's partition (its hosts' tables stay as verified)."""
    _check_owner(principal, owner, req.pkey)
    if not principal.can_write:
        raise UfmError(403, "auditors have read-only access")
    virtual = {g: m for g, m in req.members.items() if g not in owner.hosts}
    if not virtual:
        return None
    key = ufm_pkey(req.pkey)
    outside = outside_range(owner.reservation_id, virtual)
    if outside:
        raise UfmError(
            403,
            f"pkey {key} belongs to reservation {owner.reservation_id}; {', '.join(ufm_guid(g) for g in outside[:8])} "
            f"{'is' if len(outside) == 1 else 'are'} neither a port of its hosts nor in its virtual GUID range "
            f"{_range_text(owner.reservation_id)}",
        )
    return _change_virtual(actor, principal, fabric, owner, f"add {len(virtual)} virtual GUIDs to {key}", add=virtual)


def _change_virtual(
    actor: Actor,
    principal: Principal,
    fabric: Fabric,
    owner: Owner,
    what: str,
    *,
    add: dict[int, str] | None = None,
    remove: list[int] | None = None,
) -> ChangeRequest | None:
    """The reservation's tenant (nobody else) changes its virtual GUIDs; pushed and verified."""
    if principal.tenant_id != owner.tenant_id or not principal.can_write:
        raise UfmError(403, f"only reservation {owner.reservation_id}'s tenant may {what.split(' ')[0]} virtual GUIDs")
    try:
        change_virtual_guids(actor, principal, owner.reservation_id, add=add, remove=remove or [])
    except ConsoleError as exc:
        raise UfmError(exc.status, exc.detail, retry_after=exc.retry_after) from exc
    return push_and_wait(actor, principal, fabric, f"UFM API: {what}", reservation=True)


def remove_from_reservation(
    actor: Actor, principal: Principal, fabric: Fabric, owner: Owner, pkey: int, guids: list[int]
) -> ChangeRequest | None:
    """Remove virtual GUIDs its tenant added (absent ones are ignored); its hosts' GUIDs stay (403)."""
    _check_owner(principal, owner, pkey)
    key = ufm_pkey(pkey)
    hosts = [ufm_guid(g) for g in guids if g in owner.hosts]
    if hosts:
        raise UfmError(
            403,
            f"pkey {key} belongs to reservation {owner.reservation_id}: {', '.join(hosts[:8])} "
            f"{'is a port' if len(hosts) == 1 else 'are ports'} of its hosts and cannot be removed through this API",
        )
    return _change_virtual(actor, principal, fabric, owner, f"remove {len(guids)} GUIDs from {key}", remove=guids)


def create_pkey(
    actor: Actor, principal: Principal, fabric: Fabric, pkey: int, *, name: str, ip_over_ib: bool
) -> ChangeRequest | None:
    """``POST resources/pkeys/add``: a P_Key without GUIDs; an existing one is left as it is."""
    row = _writable_row(principal, fabric, pkey, verb="changed")
    if row is None:
        _save(actor, principal, fabric, None, pkey, members={}, ipoib=ip_over_ib, name=name)
    return push_and_wait(actor, principal, fabric, f"UFM API: create {ufm_pkey(pkey)}")


def set_guids(actor: Actor, principal: Principal, fabric: Fabric, req: GuidsRequest) -> ChangeRequest | None:
    """``PUT resources/pkeys``: the P_Key's GUIDs become exactly these."""
    row = _writable_row(principal, fabric, req.pkey, verb="changed")
    _save(actor, principal, fabric, row, req.pkey, members=dict(req.members), ipoib=req.ip_over_ib, indx0=req.index0)
    return push_and_wait(actor, principal, fabric, f"UFM API: set {len(req.members)} GUIDs of {ufm_pkey(req.pkey)}")


def remove_guids(
    actor: Actor, principal: Principal, fabric: Fabric, pkey: int, guids: list[int]
) -> ChangeRequest | None:
    """Remove GUIDs from a P_Key (absent ones are ignored, as UFM does); the P_Key stays."""
    owner = _reservation_pkey(fabric, pkey)
    if owner is not None:
        return remove_from_reservation(actor, principal, fabric, owner, pkey, guids)
    row = _writable_row(principal, fabric, pkey, verb="changed")
    if row is None:
        raise UfmError(404, f"pkey {ufm_pkey(pkey)} not found")
    members = {g: m for g, m in _current(row).items() if g not in set(guids)}
    _save(actor, principal, fabric, row, pkey, members=members, ipoib=row.ipoib)
    return push_and_wait(actor, principal, fabric, f"UFM API: remove {len(guids)} GUIDs from {ufm_pkey(pkey)}")


def delete_pkey(actor: Actor, principal: Principal, fabric: Fabric, pkey: int) -> ChangeRequest | None:
    """``DELETE resources/pkeys/<pkey>``: an operator partition goes; a reservation's cannot."""
    row = _writable_row(principal, fabric, pkey, verb="deleted")
    if row is None:
        raise UfmError(404, f"pkey {ufm_pkey(pkey)} not found")
    try:
        changes.delete_partition(actor, principal, fabric, name=row.name)
    except ConsoleError as exc:
        raise UfmError(exc.status, exc.detail) from exc
    return push_and_wait(actor, principal, fabric, f"UFM API: delete {ufm_pkey(pkey)}")


def push_and_wait(
    actor: Actor, principal: Principal, fabric: Fabric, reason: str, *, reservation: bool = False
) -> ChangeRequest | None:
    """Request a change for the fabric's desired state and wait until it is verified on the ports.

    ``reservation``: the change carries a reservation's partition, changed by its tenant (virtual
    GUIDs): it is requested as scheduling's reconcile does (no operator role needed; audited with
    the caller as actor), since a tenant requests no fabric change of its own.

    None when the desired state is already what was verified (an idempotent repeat). A change
    that waits for approval is returned as it is (the caller answers 202); a failed, rolled back
    or cancelled change, or one not finished within ``UFM_API_WAIT_S``, is a 5xx in UFM's shape.
    """
    applied = applied_of(fabric)
    try:
        desired = build_desired(fabric)
        if applied is not None and applied.desired == desired:
            return None
        # A repeat while the first call's change is still open waits for that change.
        same = [c for c in fabric.changes.filter(status__in=OPEN).order_by("-pk") if c.desired == desired]
        if same:
            change = same[0]
        elif reservation:
            found = changes.reconcile(fabric, actor=actor)
            if found is None:  # a concurrent call created it (or it was applied) meanwhile
                return push_and_wait(actor, principal, fabric, reason, reservation=True)
            change = found
        else:
            change = changes.request_change(actor, principal, fabric, reason=reason)
    except ConsoleError as exc:
        raise UfmError(exc.status, exc.detail) from exc
    deadline = time.monotonic() + float(settings.UFM_API_WAIT_S)
    while change.status not in ChangeRequest.TERMINAL and change.status != Status.PENDING_APPROVAL:
        if time.monotonic() > deadline:
            raise UfmError(
                504, f"change {change.pk} not verified within {settings.UFM_API_WAIT_S} s (still {change.status})"
            )
        time.sleep(0.2)
        change.refresh_from_db()
    if change.status in (Status.APPLIED, Status.UNCHANGED, Status.PENDING_APPROVAL):
        return change
    if change.status == Status.CANCELLED and change.error.startswith("superseded"):
        # A newer change, requested after this call's partition was written, carried it and was
        # verified first (the pipeline cancels the older one): the call's effect is on the ports.
        return change
    if not principal.sees_all_tenants:
        # a driver's words (paths on the SM host, other ports' GUIDs) are an operator's to read
        raise UfmError(500, f"change {change.pk} {change.status}: an operator has the detail (change {change.pk})")
    raise UfmError(500, f"change {change.pk} {change.status}: {change.error or 'see the change in the console'}")
