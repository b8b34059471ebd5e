"""The browser designer's pages: the parameter form and the canvas of a saved revision.

Thin: the pages carry their initial data as `json_script`; everything else goes through the
designer REST API (/api/designs/…). The one JSON endpoint here draws an *edited, unsaved* graph
(the canvas of a saved revision comes from the API), so the browser never lays a graph out itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Role
from console.web.context import principal_for, refuse_readers
from designer import import_jobs
from designer.canvas import CanvasError, canvas_view
from designer.errors import DesignerError
from designer.exports import FORMATS
from designer.models import Design, DesignRevision, ImportJob
from designer.options import TOPOLOGIES
from designer.services import assign_node_types, graph_from_payload, import_ibnetdiscover, load_catalogue

READERS = {Role.OPERATOR, Role.AUDITOR}


def _reader(request: HttpRequest) -> bool:
    """Operators and auditors see the designer (auditors read-only); for anyone else it is 404."""
    principal = principal_for(request)
    if principal.role not in READERS:
        raise Http404
    return principal.role == Role.OPERATOR and principal.can_write


def _catalogue_data() -> dict:
    cat = load_catalogue()
    switches = []
    for m in cat.switches.values():
        row = asdict(m)
        row["split_modes"] = {k: list(v) for k, v in m.split_modes.items()}
        switches.append(row)
    return {
        "switches": switches,
        "nodes": [asdict(n) for n in cat.nodes.values()],
        "cables": [asdict(c) for c in cat.cables.values()],
        "transceivers": [asdict(t) for t in cat.transceivers.values()],
    }


@login_required
def designer_new(request: HttpRequest) -> HttpResponse:
    """A new design: parameters with instant preview, comparison, save."""
    editable = _reader(request)
    designs = Design.objects.order_by("-created_at")[:50]
    init = {
        "page": "new",
        "editable": editable,
        "topologies": list(TOPOLOGIES),
        "catalogue": _catalogue_data(),
        "designs": [
            {
                "id": d.id,
                "name": d.name,
                "topology": d.topology,
                "latest": d.latest_revision,
                "url": reverse("web:designer-design", args=[d.id]),
            }
            for d in designs
        ],
    }
    context = {"init": init, "designs": init["designs"], "editable": editable, "active": "designer"}
    return render(request, "web/designer.html", context)


@login_required
def designer_design(request: HttpRequest, design_id: int, revision: int | None = None) -> HttpResponse:
    """The canvas of a saved revision (the latest one unless a number is given)."""
    editable = _reader(request)
    design = get_object_or_404(Design, pk=design_id)
    number = revision if revision is not None else design.latest_revision
    revisions = list(
        DesignRevision.objects.filter(design=design).order_by("number").values("number", "message", "created_at")
    )
    current = next((r for r in revisions if r["number"] == number), None)
    if current is None:
        raise Http404
    init = {
        "page": "canvas",
        "editable": editable,
        "design": {
            "id": design.id,
            "name": design.name,
            "description": design.description,
            "topology": design.topology,
            "latest_revision": design.latest_revision,
        },
        "revision": number,
        "revisions": [
            {
                "number": r["number"],
                "message": r["message"],
                "created_at": r["created_at"].isoformat(),
                "url": reverse("web:designer-revision", args=[design.id, r["number"]]),
            }
            for r in revisions
        ],
        "catalogue": _catalogue_data(),
        "exports": [
            {
                "name": f.name,
                "filename": f.filename,
                "description": f.description,
                "url": f"/api/designs/{design.id}/revisions/{number}/export/{f.name}/",
            }
            for f in FORMATS.values()
        ],
        "canvas_url": reverse("web:designer-canvas"),
    }
    context = {
        "init": init,
        "design": design,
        "revision": current,
        "editable": editable,
        "active": "designer",
    }
    return render(request, "web/designer_canvas.html", context)


@login_required
@require_POST
def designer_canvas(request: HttpRequest) -> JsonResponse:
    """Canvas of an edited, unsaved graph: body {"graph", "level", "focus"}."""
    if not _reader(request):
        raise Http404
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        return _invalid("the body is not JSON")
    if not isinstance(body, dict):
        return _invalid("the body must be an object with graph, level and focus")
    try:
        graph = graph_from_payload(body.get("graph"))
        view = canvas_view(graph, str(body.get("level") or "auto"), body.get("focus") or None)
    except CanvasError as exc:
        return _invalid(str(exc), "level")
    except DesignerError as exc:
        return _invalid(str(exc))
    except ConsoleError as exc:
        return JsonResponse(exc.as_dict(), status=exc.status)
    return JsonResponse(view)


def _invalid(detail: str, field: str = "graph") -> JsonResponse:
    return JsonResponse({"code": "invalid", "detail": detail, "fields": {field: [detail]}}, status=400)


def _upload_text(request: HttpRequest, field: str) -> str | None:
    """An uploaded file as text (a BOM dropped, undecodable bytes replaced), or the pasted text."""
    upload = request.FILES.get(field)
    if upload is not None:
        return upload.read().decode("utf-8-sig", errors="replace")
    return request.POST.get(f"{field}_text") or None


#: Finding codes that need no action on an imported fabric (a real dump names no cable types):
#: folded under the findings with their count, the ones that need a look first.
NOISE_CODES = frozenset({"no-cable", "skipped-lines"})


@login_required
@require_http_methods(["GET", "POST"])
def designer_import(request: HttpRequest) -> HttpResponse:
    """The import page: its form (GET); the import (POST) of an ibnetdiscover dump, a node-name
    map and host types, then the result's own URL (no resubmit on reload), or for a large dump
    the job's page (:mod:`designer.import_jobs`); bad input is the form again with the error."""
    editable = _reader(request)  # 404 for who does not see the designer
    context: dict = {"active": "designer", "editable": editable, "name": ""}
    if request.method != "POST":
        return render(request, "web/designer_import.html", context)
    refuse_readers(request)  # 403 for who reads it only (auditors)
    name = request.POST.get("name", "").strip()
    dump, names = _upload_text(request, "dump"), _upload_text(request, "node_name_map")
    host_types = request.POST.get("host_types", "")[:100_000] or None
    context |= {"name": name, "host_types": host_types or ""}
    try:
        if not name or not dump:
            context["error"] = "Give the design a name and choose the ibnetdiscover output to import."
            return render(request, "web/designer_import.html", context, status=400)
        actor, principal = Actor.for_user(request.user), principal_for(request)
        if import_jobs.needs_job(dump, names, host_types):
            job = import_jobs.start(actor, principal, name=name, text=dump, node_name_map=names, host_types=host_types)
            return redirect("web:designer-import-job", job_id=job.pk)
        design, _ = import_ibnetdiscover(
            actor, principal, name=name, text=dump, node_name_map=names, host_types=host_types
        )
    except ConsoleError as exc:
        context["error"] = exc.detail
        return render(request, "web/designer_import.html", context, status=400)
    return redirect("web:designer-imported", design_id=design.pk)


@login_required
def designer_import_job(request: HttpRequest, job_id: int) -> HttpResponse:
    """A large import's page: its phase and percent while a worker runs it (the page refreshes
    itself), then the design's import result, or why it failed (with the form to try again)."""
    editable = _reader(request)
    job = import_jobs.read(job_id)
    if job is None:
        raise Http404
    if job.state == ImportJob.State.DONE and job.design_id is not None:
        return redirect("web:designer-imported", design_id=job.design_id)
    context: dict = {"active": "designer", "editable": editable, "name": job.name, "job": job}
    if job.state == ImportJob.State.FAILED:
        context["error"] = job.error
    elif job.state == ImportJob.State.DONE:
        context["error"] = "The design this import made has been deleted since."
    else:
        context["follow"] = True
    return render(request, "web/designer_import.html", context)


@login_required
def designer_imported(request: HttpRequest, design_id: int) -> HttpResponse:
    """What came in with an imported design (its first revision's summary): a URL of its own."""
    editable = _reader(request)
    design = get_object_or_404(Design, pk=design_id, options__imported="ibnetdiscover")
    revision = get_object_or_404(design.revisions.defer("graph"), number=1)
    summary = revision.summary
    lines = summary.get("warnings", [])
    noise = [{"code": line.split(" (", 1)[0], "line": line} for line in lines if line.split(" (", 1)[0] in NOISE_CODES]
    return render(
        request,
        "web/designer_import.html",
        {
            "active": "designer",
            "editable": editable,
            "design": design,
            "summary": summary,
            "info": summary.get("import", {}),
            "findings": [line for line in lines if line.split(" (", 1)[0] not in NOISE_CODES],
            "noise": noise,
            "noise_count": sum(1 for f in summary.get("warnings_full", []) if f.get("code") in NOISE_CODES),
            "canvas_url": reverse("web:designer-design", args=[design.id]),
        },
    )


@login_required
@require_POST
def designer_node_types(request: HttpRequest, design_id: int) -> HttpResponse:
    """Which hosts are which servers, in bulk (the imported page's form): the next revision."""
    _reader(request)
    refuse_readers(request)
    design = get_object_or_404(Design, pk=design_id)
    text = _upload_text(request, "host_types") or request.POST.get("host_types", "")
    try:
        revision = assign_node_types(Actor.for_user(request.user), principal_for(request), design, text[:2_000_000])
    except ConsoleError as exc:
        messages.error(request, exc.detail)
        return redirect("web:designer-imported", design_id=design.pk)
    messages.success(request, f"Revision {revision.number}: {revision.message}.")
    return redirect("web:designer-revision", design_id=design.pk, revision=revision.number)
