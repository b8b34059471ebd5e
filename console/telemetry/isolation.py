"""The isolation audit's schedule and its alarms (the audit itself: console/fabric/isolation.py).

Beat publishes ``telemetry.isolation_audits`` every ``ISOLATION_AUDIT_S``; it queues one
``telemetry.isolation_audit`` per fabric on its site's queue (the audit talks to the SM host),
and a push's outcome queues one too. Each run's result becomes alarms:

- ``isolation_leak`` (critical, operators only: it names two tenants' hosts): a sampled pair of
  hosts that must not talk had a path, or a partition on the SM host breaks the isolation rule,
  or a port carries a key it must not. Resolved by the first audit that finds none.
- ``config_drift`` (warning): the SM host's files differ from what the console last wrote; the
  diff is in the event's detail. Resolved when they match again.
- ``member_absent`` (warning, to the reservation's tenant): a partition's member port was not on
  the fabric when its last change was verified (one dead host blocks nobody, and is reported).
"""

from __future__ import annotations

from typing import Any

from celery import current_app, shared_task
from django.db import transaction

from console.fabric import hooks, routing
from console.fabric.isolation import latest, run_audit
from console.fabric.models import ChangeRequest, Fabric
from console.telemetry import services
from console.telemetry.alarms import Transition
from console.telemetry.models import FabricEvent
from console.tenancy.context import Actor

AUDIT_FABRIC = "telemetry.isolation_audit"
AUDIT_ALL = "telemetry.isolation_audits"
ACTOR_NAME = "task:telemetry.isolation_audit"
OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "ignore_result": True,
    "time_limit": 120,
    "soft_time_limit": 100,  # below time_limit: the global soft limit (540 s) is not
}


@shared_task(name=AUDIT_ALL, **OPTIONS)
def audit_all() -> int:
    """Queue an audit of every fabric (each on its site's queue, dropped if not started in time)."""
    ids = list(Fabric.objects.values_list("pk", flat=True))
    for fabric_id in ids:
        publish_audit(fabric_id)
    return len(ids)


def publish_audit(fabric_id: int) -> None:
    """Queue one audit of ``fabric_id`` now (by name: any layer may ask)."""
    current_app.send_task(AUDIT_FABRIC, kwargs={"fabric_id": fabric_id}, expires=120)


@shared_task(name=AUDIT_FABRIC, **OPTIONS)
def audit_fabric(fabric_id: int) -> str:
    """Audit one fabric and turn the result into alarms."""
    fabric = Fabric.objects.filter(pk=fabric_id).select_related("revision").first()
    if fabric is None:
        return "no such fabric"
    audit = run_audit(fabric)
    apply_audit(fabric_id)
    return f"{len(audit.leaks)} leaks, {len(audit.findings)} findings" + (
        f", error: {audit.error}" if audit.error else ""
    )


def audit_transitions(fabric_id: int) -> list[Transition]:
    """Open or clear ``isolation_leak`` and ``config_drift`` from the fabric's last audit."""
    fabric = Fabric.objects.get(pk=fabric_id)
    audit = latest(fabric)
    if audit is None or audit.error:
        return []
    out = []
    problems = [*audit.leaks, *(f for f in audit.findings if f.get("kind") != "adopted")]
    if problems:
        first = problems[0]
        out.append(
            Transition(
                "open",
                FabricEvent.Kind.ISOLATION_LEAK,
                "isolation",
                "critical",
                f"isolation: {len(audit.leaks)} cross-tenant path(s), {len(problems) - len(audit.leaks)} finding(s); "
                f"{first.get('message', '')}",
                {"leaks": audit.leaks[:20], "findings": audit.findings[:20], "audit": audit.pk},
            )
        )
    else:
        out.append(Transition("clear", FabricEvent.Kind.ISOLATION_LEAK, "isolation", message="isolation audit clean"))
    if audit.drift:
        files = ", ".join(sorted(audit.drift))
        out.append(
            Transition(
                "open",
                FabricEvent.Kind.CONFIG_DRIFT,
                "files",
                "warning",
                f"{files} on the SM host differ from what the console wrote",
                {"diff": audit.drift},
            )
        )
    elif not fabric.changes.filter(status__in=["queued", "applying", "verifying"]).exists():
        out.append(
            Transition("clear", FabricEvent.Kind.CONFIG_DRIFT, "files", message="files as the console wrote them")
        )
    return out


def absent_transitions(fabric_id: int) -> tuple[list[Transition], dict[str, list]]:
    """``member_absent`` per partition from the last verified change: opened for a partition
    with ports off the fabric (its reservation's tenant told), cleared when none is."""
    change = (
        ChangeRequest.objects.filter(fabric_id=fabric_id, status__in=["applied", "unchanged"])
        .order_by("-finished_at", "-pk")
        .first()
    )
    if change is None:
        return [], {}
    absent: dict[str, list[str]] = (change.outcome or {}).get("absent_members") or {}
    by_pkey = {p["pkey"]: p for p in (change.desired or {}).get("partitions", [])}
    out, affected = [], {}
    for pkey, guids in sorted(absent.items()):
        partition = by_pkey.get(pkey, {})
        subject = f"absent-{pkey}"
        out.append(
            Transition(
                "open",
                FabricEvent.Kind.MEMBER_ABSENT,
                subject,
                "warning",
                f"{len(guids)} member port(s) of {partition.get('name', pkey)} ({pkey}) are not on the fabric",
                {"pkey": pkey, "ports": guids, "change": change.pk},
            )
        )
        if partition.get("reservation_id") is not None:
            affected[subject] = [(partition["reservation_id"], partition.get("tenant_id"))]
    opened = set(
        FabricEvent.objects.unresolved()
        .filter(fabric_id=fabric_id, kind=FabricEvent.Kind.MEMBER_ABSENT)
        .values_list("subject", flat=True)
    )
    for subject in sorted(opened - {f"absent-{pkey}" for pkey in absent}):
        out.append(Transition("clear", FabricEvent.Kind.MEMBER_ABSENT, subject, message="every member port is back"))
    return out, affected


def apply_audit(fabric_id: int) -> None:
    """Alarms of the last audit and of the last change's absent members, applied."""
    absent, affected = absent_transitions(fabric_id)
    services.apply_transitions(
        fabric_id, [*audit_transitions(fabric_id), *absent], affected, actor=Actor.system(ACTOR_NAME)
    )


def _after_change(fabric_id: int, **_: object) -> None:
    """A change of the fabric ended (a fabric change listener, inside the transaction that
    writes its outcome): audit the fabric once that commits."""
    transaction.on_commit(lambda: publish_audit(fabric_id))


def connect() -> None:
    """Route each fabric's audit to its site's queue and audit after every push
    (TelemetryConfig.ready)."""
    routing.register(AUDIT_FABRIC, routing.argument("fabric_id", 0))
    hooks.register_change_listener(
        "telemetry.isolation", hooks.ChangeListener(on_verified=_after_change, on_failed=_after_change)
    )
