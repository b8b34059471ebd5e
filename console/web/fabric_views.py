"""Fabric pages: every managed fabric with its lab state, and one fabric's discovery and compare.

Operators and auditors only (for anyone else the pages do not exist: 404). Thin: the lab
registry and the discovery services do the work; the run-discovery button posts back here and
queues a discovery job (a worker runs it through the fabric's agent). Like ``fabric compare``,
the page compares a current discovery (queueing one when the stored one is stale and waiting up
to ``FABRIC_COMPARE_WAIT_S`` for it; ``?discover=false`` shows the stored one as it is) and says
its time and age; a job still running is shown with its step, and the page follows it in place until it ends.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.fabric import isolation
from console.fabric.agents.services import agents_json
from console.fabric.changes.ownership import port_names
from console.fabric.discovery import jobs
from console.fabric.discovery import services as discovery
from console.fabric.keys import fingerprint
from console.fabric.lab.fabrics import lab_status
from console.fabric.models import DiscoveryJob, Fabric, FabricAgent, FabricPartition
from console.telemetry import port_health, validation
from console.telemetry.models import PortDecision, ValidationRun
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError, NotFound
from console.tenancy.models import Role
from console.web.context import principal_for, refuse_readers
from scheduling.models import Node

READERS = {Role.OPERATOR, Role.AUDITOR}


def _can_run(request: HttpRequest) -> bool:
    """Operators may run discovery; auditors read. Anyone else gets 404."""
    principal = principal_for(request)
    if principal.role not in READERS:
        raise Http404
    return principal.role == Role.OPERATOR and principal.can_write


def _with_agents(fabrics: list[Fabric]) -> set[int]:
    """The fabrics (of ``fabrics``) with an agent connected now: one query."""
    return set(
        FabricAgent.objects.filter(fabric__in=fabrics, connected=True).values_list("fabric_id", flat=True).distinct()
    )


def _lab_state(fabric: Fabric, with_agents: set[int]) -> dict:
    if fabric.driver != Fabric.Driver.LAB:
        return {"state": "n/a"}
    status = lab_status(fabric)
    if status["state"] != "up" and fabric.pk in with_agents:
        # not on this host: its agent speaks for it
        return {"state": "on its SM host", "remote": True}
    return status


@login_required
def fabrics(request: HttpRequest) -> HttpResponse:
    """Every managed fabric: driver, bound design revision, lab state, last discovery."""
    _can_run(request)
    fabrics = list(Fabric.objects.select_related("revision__design"))
    runs = discovery.latest_runs(fabrics)
    with_agents = _with_agents(fabrics)
    rows = []
    for fabric in fabrics:
        run = runs.get(fabric.pk)
        rows.append(
            {
                "fabric": fabric,
                "lab": _lab_state(fabric, with_agents),
                "run": run,
                "ok": (run.compare or {}).get("ok") if run else None,
            }
        )
    return render(request, "web/fabrics.html", {"rows": rows, "active": "fabrics"})


@login_required
def fabric_detail(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """One fabric: lab status with the env line, latest discovery + compare, routing check.
    POST (operators) runs discovery now."""
    can_run = _can_run(request)
    fabric = get_object_or_404(Fabric.objects.select_related("revision__design"), pk=fabric_id)
    if request.method == "POST":
        refuse_readers(request)  # an auditor reads the page; running discovery is 403 for them
        queued, created = jobs.start(fabric, actor=Actor.for_user(request.user))
        note = "queued" if created else "already running"
        messages.info(request, f"Discovery job {queued.pk} {note}: this page follows it.")
        return redirect(f"{request.path}?job={queued.pk}")
    refresh = request.GET.get("discover", "true").lower() not in ("false", "0", "no")
    result, error, pending = _compare(request, fabric, refresh)
    job = pending or jobs.active(fabric) or _asked_job(request, fabric)
    context = {
        "fabric": fabric,
        "lab": _lab_state(fabric, _with_agents([fabric])),
        "run": discovery.latest_run(fabric) if result else None,
        "result": result,
        "compare_error": error,
        "refresh": refresh,
        "can_run": can_run,
        "job": job,
        "follow": job is not None and job.state in DiscoveryJob.ACTIVE,
        "active": "fabrics",
        **isolation_context(fabric),
        **validation_context(request, fabric),
        **port_health_context(fabric),
    }
    return render(request, "web/fabric.html", context)


@login_required
@require_POST
def fabric_validate(request: HttpRequest, fabric_id: int) -> HttpResponse:
    """Queue the validation suite (operators); back to the fabric page, which follows the run."""
    refuse_readers(request)
    fabric = get_object_or_404(Fabric, pk=fabric_id)
    row, created = validation.start(fabric, actor=Actor.for_user(request.user), trigger="page")
    messages.info(request, f"Validation {row.pk} {'queued' if created else 'already running'}: this page follows it.")
    return redirect(f"/fabrics/{fabric.pk}/#validation")


def port_health_context(fabric: Fabric) -> dict[str, Any]:
    """The fabric page's port-health card: the policy, the ports it isolated, its last decisions."""
    policy, default = port_health.policy_of(fabric.pk)
    isolated = port_health.isolated_ports().filter(fabric=fabric)
    decisions = PortDecision.objects.filter(fabric=fabric).order_by("-at", "-id")[:10]
    return {
        "health_policy": policy.as_json(),
        "health_cap_percent": f"{policy.cap_fraction * 100:g}",
        "health_default": default,
        "isolated_ports": list(isolated.order_by("switch", "port")),
        "port_decisions": list(decisions),
        "lost_nodes": list(Node.objects.filter(fabric=fabric).exclude(path_lost="").order_by("name")),
    }


def validation_context(request: HttpRequest, fabric: Fabric) -> dict[str, Any]:
    """The fabric page's validation card: the latest run (followed while it runs)."""
    latest = ValidationRun.objects.filter(fabric=fabric).order_by("-created_at", "-id").first()
    verdicts = []
    for v in latest.verdicts if latest is not None else []:
        shown = v.get("offenders", [])[:5]
        verdicts.append({**v, "shown": shown, "more": max(0, int(v.get("count", 0)) - len(shown))})
    return {"validation": latest, "verdicts": verdicts, "validation_failed": latest.failed if latest else []}


def _asked_job(request: HttpRequest, fabric: Fabric) -> DiscoveryJob | None:
    """The job named by ``?job=`` (the one the run-discovery button queued), to say how it ended."""
    asked = request.GET.get("job", "")
    return DiscoveryJob.objects.filter(fabric=fabric, pk=int(asked)).first() if asked.isdigit() else None


def isolation_context(fabric: Fabric) -> dict[str, Any]:
    """The fabric page's isolation card: the last audit, service and operator partitions."""
    audit = isolation.latest(fabric)
    names = port_names(fabric)
    services = []
    rows = FabricPartition.objects.filter(fabric=fabric).exclude(source=FabricPartition.Source.RESERVATION)
    for row in rows.filter(source=FabricPartition.Source.SERVICE).prefetch_related("allowed_tenants"):
        hosts = sorted(
            {names.get(int(port, 16), port).split(" ")[0] for port, _ in row.members if port.startswith("0x")}
        )
        services.append(
            {
                "name": row.name,
                "pkey": f"{row.pkey:#06x}",
                "description": row.description,
                "hosts": hosts,
                "tenants": sorted(t.name for t in row.allowed_tenants.all()),
            }
        )
    operator = [
        {"name": row.name, "pkey": f"{row.pkey:#06x}", "raw": row.raw, "removed": row.removed}
        for row in rows.filter(source=FabricPartition.Source.OPERATOR)
    ]
    return {
        "audit": audit,
        "problems": [f for f in (audit.findings if audit else []) if f.get("kind") != "adopted"],
        "period": int(settings.ISOLATION_AUDIT_S),
        "fingerprint": fingerprint(fabric),
        "services": services,
        "operator_partitions": operator,
        "agents": agents_json(fabric),
    }


def _compare(
    request: HttpRequest, fabric: Fabric, refresh: bool
) -> tuple[dict[str, Any] | None, str, DiscoveryJob | None]:
    """The compare the page shows, why a fresh one could not be made (then the stored one, marked
    with its age, is shown beside the error), and the discovery job still running, if any."""
    actor = Actor.for_user(request.user)
    fresh = jobs.through_job(fabric, actor=actor, wait_s=settings.FABRIC_COMPARE_WAIT_S)
    pending = None
    try:
        return discovery.compare(fabric, refresh=refresh, actor=actor, fresh=fresh), "", None
    except jobs.DiscoveryPending as exc:
        pending, error = exc.job, ""
    except ConsoleError as exc:
        if isinstance(exc, NotFound) and not refresh:  # nothing stored, no sweep asked: "No discovery yet"
            return None, "", None
        error = exc.detail
    try:
        return discovery.compare(fabric, refresh=False), error, pending
    except NotFound:
        return None, error, pending
