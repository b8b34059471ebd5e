"""Unhealthy ports, isolated with reasons (issue 35): the health policy
(:mod:`console.telemetry.health_policy`) run by the collector on every sweep, its decisions
stored with the readings that caused them and the reservations whose traffic crossed the port,
and applied through the change pipeline.

- The collector feeds :class:`PortHealth` each sweep's error totals per measured port; a policy
  edited meanwhile is picked up on the collector's slow sweeps (history and isolations kept).
  A policy with a gauge rule (Temperature, BER) also gets the PHY readings the SM host records
  (mlxlink's, :mod:`designer.imports.phy`), read every :data:`PHY_EVERY_S` seconds: the module's
  temperature and the effective (post-FEC) BER of each switch port that has one.
- A decision is a :class:`~console.telemetry.models.PortDecision` row (audited). Outside dry run,
  ``isolate`` administers the port down (``PortAdminState``, reason ``ibconsole health: …``)
  and ``restore`` up again, and a reconcile pushes it: the change disables the port on the wire,
  reads it back and is audited like any other.
- The reservations named are the owners of the port's link in the collector's workload model:
  their hosts' links and the links their traffic is routed over, by the forwarding tables read
  from the switches.
- :func:`preview`: the decisions a policy would have made over the stored samples of the last
  hour (the raw samples keep the errors by counter).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from django.db import DatabaseError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from console.fabric import changes
from console.fabric.changes.ports import set_port_admin
from console.fabric.models import Fabric, PortAdminState
from console.notify.services import iso
from console.telemetry.core import PortReading
from console.telemetry.health_policy import (
    COUNTERS,
    DEFAULT_POLICY,
    Decision,
    Evaluator,
    Policy,
    PolicyError,
    parse_policy,
    replay,
)
from console.telemetry.linkmap import LinkMap
from console.telemetry.models import LinkSample, PortDecision, PortHealthPolicy
from console.telemetry.workload import port_link
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError, Invalid
from console.tenancy.models import Principal, Role
from console.tenancy.permissions import require_operator
from designer.imports import phy
from scheduling.services import notices

log = logging.getLogger(__name__)

ACTOR = Actor.system("telemetry:health-policy")
SYSTEM_OPERATOR = Principal(None, Role.OPERATOR, None)
#: The reason the policy gives the ports it administers (how it finds them again).
REASON = "ibconsole health: "
#: how often the PHY readings are read for a policy's gauges (UFM's PDR plugin samples every 5 min)
PHY_EVERY_S = 300.0


def policy_of(fabric_id: int) -> tuple[Policy, bool]:
    """The fabric's policy, and whether it is the default (no policy set)."""
    row = PortHealthPolicy.objects.filter(fabric_id=fabric_id).first()
    if row is None:
        return DEFAULT_POLICY, True
    try:
        return parse_policy(row.document), False
    except PolicyError as exc:  # written by an older version: the default, and say so
        log.warning("health policy of fabric %s unusable (%s): the default applies", fabric_id, exc)
        return DEFAULT_POLICY, True


def set_policy(actor: Actor, principal: Principal, fabric: Fabric, document: Any) -> Policy:
    """Replace the fabric's policy (operators; audited)."""
    require_operator(principal, to="change fabrics")
    try:
        policy = parse_policy(document)
    except PolicyError as exc:
        raise Invalid(str(exc), fields={"policy": [str(exc)]}) from exc
    with transaction.atomic():
        row = PortHealthPolicy.objects.select_for_update().filter(fabric=fabric).first()
        before = row.document if row is not None else None
        if row is None:
            row = PortHealthPolicy(fabric=fabric)
        row.document = policy.as_json()
        row.save()
        audit.record(actor, "fabric.health_policy", fabric, before={"policy": before}, after={"policy": row.document})
    return policy


def isolated_ports() -> QuerySet[PortAdminState]:
    """The ports the policy isolated and has not restored (every fabric's; filter by fabric)."""
    return PortAdminState.objects.filter(enabled=False, reason__startswith=REASON)


def isolated_now(fabric_id: int) -> dict[tuple[str, int], float]:
    """The fabric's ports the policy isolated and has not restored, with when."""
    return {(r.switch, r.port): r.updated_at.timestamp() for r in isolated_ports().filter(fabric_id=fabric_id)}


class PortHealth:
    """One fabric's policy in the collector: fed every sweep, applies what it decides."""

    def __init__(
        self,
        fabric_id: int,
        lm: LinkMap,
        phy_source: Callable[[], Mapping[str, Any]] | None = None,
        node_ids: Mapping[str, str] | None = None,
    ) -> None:
        self.fabric_id = fabric_id
        self.lm = lm
        self.policy, _ = policy_of(fabric_id)
        self.evaluator = Evaluator(self.policy, len(lm.ends), isolated_now(fabric_id))
        self.phy_source = phy_source  # the SM host's PHY readings, "<device>/<port>" → PhyReading JSON
        self.switch_of_guid = {phy.device_key(nid[2:]): name for name, nid in (node_ids or {}).items()}
        self.gauges: dict[tuple[str, int], dict[str, float]] = {}
        self.gauges_at = -math.inf

    def refresh(self) -> None:
        """Pick up a policy an operator changed (the ports' history and isolations are kept)."""
        policy, _ = policy_of(self.fabric_id)
        if policy != self.policy:
            old = self.evaluator
            # out of (or into) dry run, the ports isolated are those on the wire, not the dry run's
            isolated = old.isolated if policy.dry_run == self.policy.dry_run else isolated_now(self.fabric_id)
            self.policy, self.evaluator = policy, Evaluator(policy, len(self.lm.ends), isolated)
            self.evaluator.history = old.history

    def observe(
        self, at: float, readings: Mapping[tuple[str, int], PortReading], owners: Mapping[str, list[tuple[int, int]]]
    ) -> list[PortDecision]:
        """One sweep's readings (error totals per measured port); the decisions it led to, stored."""
        values: dict[tuple[str, int], dict[str, float]] = {key: dict(r.errors) for key, r in readings.items()}
        for key, gauges in self._gauges(at).items():
            values.setdefault(key, {}).update(gauges)
        decisions = self.evaluator.observe(at, values)
        out = []
        for decision in decisions:
            try:
                out.append(apply(self.fabric_id, decision, self.policy, self.lm, owners))
            except DatabaseError as exc:  # the next sweep decides again
                log.warning("health decision on %s not stored: %s", decision.port, exc)
        return out

    def _gauges(self, at: float) -> dict[tuple[str, int], dict[str, float]]:
        """The switch ports' temperature and BER, read again every :data:`PHY_EVERY_S` seconds
        while the policy has a gauge rule (nothing read otherwise)."""
        if self.phy_source is None or not any(rule.gauge for rule in self.policy.rules):
            return {}
        if at - self.gauges_at >= PHY_EVERY_S:
            self.gauges_at = at
            try:
                self.gauges = self._switch_gauges(self.phy_source())
            except Exception as exc:  # the SM host or its agent did not answer: keep the last
                log.warning("PHY readings of fabric %s not read: %s", self.fabric_id, exc)
        return self.gauges

    def _switch_gauges(self, readings: Mapping[str, Any]) -> dict[tuple[str, int], dict[str, float]]:
        out: dict[tuple[str, int], dict[str, float]] = {}
        for key, doc in readings.items():
            device, _, port = key.rpartition("/")
            if device.startswith("lid-"):
                switch = self.lm.device_of_lid.get(int(device[4:]))
            else:
                switch = self.switch_of_guid.get(device)
            if switch is None or switch not in self.lm.switch_lids:
                continue  # a host's port, or a device this fabric does not know
            reading = phy.PhyReading.from_json(doc)
            gauges = {"Temperature": reading.temperature, "BER": reading.effective_ber}
            out[(switch, int(port))] = {k: v for k, v in gauges.items() if v is not None}
        return out


def apply(
    fabric_id: int, decision: Decision, policy: Policy, lm: LinkMap, owners: Mapping[str, list[tuple[int, int]]]
) -> PortDecision:
    """Store one decision (with the reservations whose traffic crosses the port) and, outside
    dry run, administer the port and reconcile: the change pipeline disables it on the wire."""
    switch, port = decision.port
    link = port_link(lm, switch, port)
    fabric = Fabric.objects.get(pk=fabric_id)
    row = PortDecision(
        fabric=fabric,
        switch=switch,
        port=port,
        link=lm.describe(link) if link else f"{switch}/{port}",
        kind=decision.kind,
        dry_run=policy.dry_run,
        reasons=decision.reasons,
        samples=decision.samples,
        reservations=[{"id": r, "tenant": t} for r, t in sorted(set(owners.get(link or "", [])))],
        at=dt.datetime.fromtimestamp(decision.at, tz=dt.UTC),
    )
    if not policy.dry_run and decision.kind in (PortDecision.Kind.ISOLATE, PortDecision.Kind.RESTORE):
        restore = decision.kind == PortDecision.Kind.RESTORE
        try:
            set_port_admin(
                ACTOR,
                SYSTEM_OPERATOR,
                fabric,
                switch=switch,
                port=port,
                enabled=restore,
                reason=(REASON + decision.reasons[0])[:200],
            )
            row.change = changes.reconcile(fabric, actor=ACTOR)
        except ConsoleError as exc:
            row.error = exc.detail[:300]
    with transaction.atomic():
        row.save()
        audit.record(ACTOR, "fabric.port_health", fabric, after=decision_json(row))
        if row.kind == PortDecision.Kind.ISOLATE and not row.dry_run and not row.error:
            notices.fabric_fault([r["id"] for r in row.reservations], isolated_fault(row))
    return row


def isolated_fault(row: PortDecision) -> dict[str, Any]:
    """The tenants' notice of a port the policy isolated (``reservation.fabric_fault``)."""
    return {
        "kind": "port_isolated",
        "severity": "warning",
        "message": f"port {row.switch}/{row.port} crossed the fabric's health policy: {row.reasons[0]}",
        "opened_at": iso(row.at),
        "port": f"{row.switch}/{row.port}",
        "action": "the console disabled the port; the subnet manager routes your traffic around it",
    }


def decision_json(row: PortDecision) -> dict[str, Any]:
    return {
        "id": row.pk,
        "fabric": row.fabric_id,
        "switch": row.switch,
        "port": row.port,
        "link": row.link,
        "kind": row.kind,
        "dry_run": row.dry_run,
        "reasons": row.reasons,
        "samples": row.samples,
        "reservations": row.reservations,
        "change": row.change_id,
        "error": row.error,
        "at": row.at.isoformat(),
    }


def preview(fabric: Fabric, document: Any, *, seconds: float = 3600.0) -> dict[str, Any]:
    """What ``document`` (a policy) would have decided over the fabric's stored samples of the
    last ``seconds`` (raw samples: the errors by counter of each storage interval)."""
    try:
        policy = parse_policy(document)
    except PolicyError as exc:
        raise Invalid(str(exc), fields={"policy": [str(exc)]}) from exc
    since = timezone.now() - dt.timedelta(seconds=seconds)
    rows = LinkSample.objects.filter(fabric=fabric, resolution=LinkSample.Resolution.RAW, at__gte=since)
    totals: dict[str, dict[str, float]] = {}
    readings: list[tuple[float, tuple[str, int], dict[str, float]]] = []
    for link_id, at, counts in rows.order_by("at", "link_id").values_list("link_id", "at", "error_counts"):
        switch, _, port = link_id.rpartition("/")
        if not port.isdigit():
            continue
        total = totals.setdefault(link_id, dict.fromkeys(COUNTERS, 0.0))
        for name, value in (counts or {}).items():
            total[name] = total.get(name, 0.0) + float(value)
        readings.append((at.timestamp(), (switch, int(port)), dict(total)))
    # a sample holds the errors of the interval before it: every port starts from zero just before
    first = readings[0][0] - 1.0 if readings else 0.0
    start = [(first, port, dict.fromkeys(COUNTERS, 0.0)) for port in sorted({r[1] for r in readings})]
    decisions = replay(policy, [*start, *readings], ports=len(totals))
    return {
        "policy": policy.as_json(),
        "since": since.isoformat(),
        "samples": len(readings),
        "ports": len(totals),
        "decisions": [d.as_json() for d in decisions],
    }
