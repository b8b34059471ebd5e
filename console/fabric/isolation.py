"""The continuous isolation audit of a fabric: run on a schedule and after each push.

One run (:func:`run_audit`): read the SM host's live files, sample SA PathRecords between hosts
that must not talk and read a sample of P_Key tables (:mod:`console.fabric.opensm.probe`, on
the SM host through the fabric's driver), judge the answers (:mod:`.opensm.isolation_audit`),
apply the isolation rule to every partition the live file holds (the operator's included), and
compare the live files with what the console last wrote. Partitions an operator added by hand
are adopted (kept and listed as operator-owned, audited) and a drift makes the fabric reconcile
(which re-verifies and repairs through the pipeline). The result is one :class:`IsolationAudit`
row; telemetry turns it into alarms.
"""

from __future__ import annotations

import difflib
import logging
import time
from dataclasses import replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from console.fabric.changes.adopt import adopt_operator_partitions
from console.fabric.changes.desired import applied_of, build_desired
from console.fabric.changes.ownership import owners_of, port_names
from console.fabric.changes.pipeline import push_options
from console.fabric.drivers import driver_for
from console.fabric.enqueue import enqueue_reconcile
from console.fabric.keys import keys_for
from console.fabric.models import ChangeRequest, Fabric, FabricPartition, IsolationAudit
from console.fabric.opensm.conf import parse_opensm_conf
from console.fabric.opensm.isolation_audit import judge, plan_audit, rule_findings
from console.fabric.opensm.lint import parse_guid
from console.fabric.opensm.partitions_file import hand_written
from console.fabric.opensm.partitions_live import as_partitions, read_live
from console.tenancy.context import Actor

log = logging.getLogger(__name__)
ACTOR = Actor.system("task:fabric.isolation_audit")
KEEP = 50  # audits kept per fabric
AUDIT_PARALLEL = 2
OPEN = (
    ChangeRequest.Status.QUEUED,
    ChangeRequest.Status.APPLYING,
    ChangeRequest.Status.VERIFYING,
)


def run_audit(fabric: Fabric, *, seed: int | None = None) -> IsolationAudit:
    """Audit ``fabric`` once and store the result (an error is stored too, never raised)."""
    started = time.monotonic()
    audit = IsolationAudit(fabric=fabric, checked_at=timezone.now())
    try:
        _audit(fabric, audit, seed if seed is not None else time.time_ns())
    except Exception as exc:  # any failure to ask is a result of its own, shown to operators
        log.warning("isolation audit of fabric %s failed: %s", fabric.pk, exc)
        audit.error = f"{type(exc).__name__}: {exc}"[:2000]
        audit.default_membership = audit.default_membership or "unknown"
    audit.duration_s = round(time.monotonic() - started, 3)
    with transaction.atomic():
        audit.save()
        stale = IsolationAudit.objects.filter(fabric=fabric).order_by("-checked_at", "-id")[KEEP:]
        IsolationAudit.objects.filter(pk__in=list(stale.values_list("pk", flat=True))).delete()
    return audit


def _audit(fabric: Fabric, audit: IsolationAudit, seed: int) -> None:
    driver = driver_for(fabric)
    probe, read = getattr(driver, "probe_isolation", None), getattr(driver, "read_live", None)
    if probe is None or read is None:
        audit.error = f"the {fabric.driver} driver cannot be audited from the console yet"
        audit.default_membership = "unknown"
        return
    desired = build_desired(fabric)
    owners = owners_of(desired)
    names = port_names(fabric)
    hosts = set(names) | set(owners)
    reservations = _reservations(desired)
    live = read()
    found = read_live(live.get("partitions.conf", ""))
    partitions = as_partitions(found.statements)
    plan = plan_audit(owners, hosts, seed=seed)
    # Two saquery processes at a time: an SM host's diag clients are few (ibsim has ten slots)
    # and a push may be verifying beside the audit.
    result = probe(plan, options=replace(push_options(fabric), parallel=AUDIT_PARALLEL))
    plan = type(plan)(tuple(p for p in plan.pairs if result.sm_guid not in p), plan.ports)
    verdict = judge(plan, result, partitions, owners, hosts=hosts, names=names, reservations=reservations)
    operator = set(FabricPartition.objects.filter(fabric=fabric, source="operator").values_list("pkey", flat=True))
    applied = applied_of(fabric)
    last = (applied.artefacts or {}).get("partitions.conf") if applied else None
    rendered = {int(p["pkey"], 16) for p in desired["partitions"]}
    new = hand_written(live.get("partitions.conf"), last, rendered)
    operator |= {p.pkey for p in new}
    verdict.findings += rule_findings(
        partitions, owners, hosts=hosts, sm_guid=result.sm_guid, names=names, operator_pkeys=operator
    )
    audit.pairs_checked = len(result.paths)
    audit.ports_read = len(result.tables)
    audit.leaks = verdict.leaks
    audit.findings = verdict.findings
    audit.default_membership = verdict.default_membership
    if not fabric.changes.filter(status__in=OPEN).exists():  # a push under way is no drift
        audit.drift = _drift(fabric, live, applied.artefacts if applied else {})
    if new:
        with transaction.atomic():
            done = adopt_operator_partitions(fabric, new, ACTOR)
            enqueue_reconcile(fabric.pk)
        audit.findings = [*audit.findings, *({"kind": "adopted", "message": line} for line in done)]
    elif audit.drift:
        with transaction.atomic():
            enqueue_reconcile(fabric.pk)  # re-verifies on the wire and repairs through the pipeline


def _reservations(desired: dict[str, Any]) -> dict[int, int]:
    out = {}
    for p in desired["partitions"]:
        if p.get("reservation_id") is not None:
            for port, _ in p["members"]:
                guid = parse_guid(str(port))
                if guid is not None:
                    out[guid] = int(p["reservation_id"])
    return out


def _drift(fabric: Fabric, live: dict[str, str], written: dict[str, str]) -> dict[str, str]:
    """File → unified diff from what the console last wrote to what the SM host has; for
    ``opensm.conf`` the options the console sets (keys named, never shown)."""
    out = {}
    for name in ("partitions.conf", "qos-policy.conf"):
        if name in written and _meaning(live.get(name)) != _meaning(written[name]):
            out[name] = "".join(
                difflib.unified_diff(
                    written[name].splitlines(keepends=True),
                    (live.get(name) or "").splitlines(keepends=True),
                    fromfile=f"written/{name}",
                    tofile=f"live/{name}",
                )
            )[: settings.ISOLATION_DRIFT_MAX_CHARS]
    keys = keys_for(fabric) if written else None
    if keys is not None and "opensm.conf" in live:
        options = parse_opensm_conf(live["opensm.conf"])
        differ = sorted(k for k, v in keys.options().items() if options.get(k) != v)
        if differ:
            out["opensm.conf"] = f"options the console sets differ on the SM host: {', '.join(differ)}\n"
    return out


def _meaning(text: str | None) -> list[str]:
    """A file's lines without comments, blank lines and surrounding blanks: a changed comment or
    header is no drift, a changed statement is."""
    return [line.split("#", 1)[0].strip() for line in (text or "").splitlines() if line.split("#", 1)[0].strip()]


def latest(fabric: Fabric) -> IsolationAudit | None:
    """The fabric's last audit."""
    return IsolationAudit.objects.filter(fabric=fabric).order_by("-checked_at", "-id").first()


def as_json(audit: IsolationAudit | None) -> dict[str, Any]:
    """``GET /api/fabrics/{id}/isolation/``: the last audit's result."""
    if audit is None:
        return {
            "checked_at": None,
            "pairs_checked": 0,
            "ports_read": 0,
            "leaks": [],
            "findings": [],
            "drift": {},
            "default_membership": "unknown",
            "error": "not audited yet",
        }
    return {
        "checked_at": audit.checked_at.isoformat(),
        "duration_s": audit.duration_s,
        "pairs_checked": audit.pairs_checked,
        "ports_read": audit.ports_read,
        "leaks": audit.leaks,
        "findings": audit.findings,
        "drift": audit.drift,
        "default_membership": audit.default_membership,
        "error": audit.error,
    }
