"""Designer services: every design mutation (permission, change, audit) and the catalogue loader.

The Django layer of the designer uses the platform (console.tenancy) for actors and audit; the
domain modules (generators, validation, metrics, exports) import neither Django nor any app.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.db.models import Count, Max

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator
from designer.builtin_catalogue import DEFAULT_CATALOGUE
from designer.catalogue import CableType, Catalogue, NodeType, SwitchModel, TransceiverType, find_item
from designer.compare import diff_graphs
from designer.errors import DesignerError, ParseError
from designer.graph import FabricGraph
from designer.imports.host_types import HostTypesError, apply_host_types, parse_host_types
from designer.imports.ibnetdiscover import Progress, import_fabric
from designer.imports.namemap import NodeNameMapError
from designer.imports.summary import import_summary
from designer.models import CatalogueEntry, Design, DesignRevision
from designer.options import Budget, PlanOptions
from designer.plan import PlanResult, evaluate, plan
from designer.serialize import graph_from_dict, graph_to_dict
from designer.validation import validate

ITEM_TYPES: dict[str, type[SwitchModel | NodeType | CableType | TransceiverType]] = {
    CatalogueEntry.Kind.SWITCH: SwitchModel,
    CatalogueEntry.Kind.NODE: NodeType,
    CatalogueEntry.Kind.CABLE: CableType,
    CatalogueEntry.Kind.TRANSCEIVER: TransceiverType,
}


def load_catalogue() -> Catalogue:
    """The built-in catalogue with operators' overrides applied."""
    items = []
    for entry in CatalogueEntry.objects.all():
        cls = ITEM_TYPES[entry.kind]
        data = dict(entry.data, name=entry.name)
        if cls is SwitchModel:
            data["split_modes"] = {k: tuple(v) for k, v in data.get("split_modes", {}).items()}
        items.append(cls(**data))
    return DEFAULT_CATALOGUE.with_items(*items) if items else DEFAULT_CATALOGUE


def catalogue_as_dict(catalogue: Catalogue) -> dict[str, list[dict[str, Any]]]:
    return {
        "switches": [asdict(m) for m in catalogue.switches.values()],
        "nodes": [asdict(n) for n in catalogue.nodes.values()],
        "cables": [asdict(c) for c in catalogue.cables.values()],
        "transceivers": [asdict(t) for t in catalogue.transceivers.values()],
    }


def preview(options: dict[str, Any], *, budget: Budget | None = None) -> PlanResult:
    """Plan without saving (the API preview, the CLI without --save, the browser form); a web
    request plans within ``budget`` (:data:`designer.options.REQUEST_BUDGET`)."""
    return plan(options, load_catalogue(), budget=budget)


def _plan_or_invalid(options: dict[str, Any], budget: Budget | None = None) -> PlanResult:
    result = preview(options, budget=budget)
    if not result.ok:
        raise Invalid(
            result.summary()["errors"][0] if result.summary()["errors"] else "impossible design",
            fields={"options": result.summary()["errors"]},
        )
    return result


def _save_revision(
    actor: Actor, design: Design, graph: FabricGraph, summary: dict, message: str, user_id: int | None
) -> DesignRevision:
    design = Design.objects.select_for_update().get(pk=design.pk)
    graph.meta["name"] = design.name
    revision = DesignRevision.objects.create(
        design=design,
        number=design.latest_revision + 1,
        message=message[:200],
        graph=graph_to_dict(graph),
        summary=summary,
        created_by_id=user_id,
    )
    Design.objects.filter(pk=design.pk).update(latest_revision=revision.number)
    audit.record(actor, "design.revision.create", revision, after=audit.snapshot(revision))
    return revision


def create_design(
    actor: Actor,
    principal: Principal,
    *,
    name: str,
    options: dict[str, Any],
    description: str = "",
    budget: Budget | None = None,
) -> tuple[Design, DesignRevision]:
    """Plan from options (within ``budget``: a web request's) and save the design with its first
    revision."""
    require_operator(principal, to="change designs and the catalogue")
    result = _plan_or_invalid(options, budget)
    assert result.graph is not None  # an ok plan has a graph
    try:
        with transaction.atomic():
            design = Design.objects.create(
                name=name,
                description=description,
                topology=result.topology,
                options=result.options.as_dict(),
                created_by_id=principal.user_id,
            )
            audit.record(actor, "design.create", design, after=audit.snapshot(design))
            revision = _save_revision(actor, design, result.graph, result.summary(), "generated", principal.user_id)
    except IntegrityError as exc:
        raise Conflict(f"a design named {name!r} exists") from exc
    design.refresh_from_db()
    return design, revision


def graph_from_payload(data: Any, *, budget: Budget | None = None) -> FabricGraph:
    """A graph posted by the browser designer or a script (within ``budget``: a web request's),
    or a precise 400."""
    try:
        graph = graph_from_dict(data, load_catalogue())
    except ParseError as exc:
        raise Invalid(str(exc), fields={"graph": [str(exc)]}) from None
    if budget is not None:
        endpoints = sum(len(n.port_guids) or 1 for n in graph.nodes.values())
        for count, limit, what in (
            (endpoints, budget.endpoints, "endpoints"),
            (len(graph.switches), budget.switches, "switches"),
        ):
            if count > limit:
                detail = f"the graph has {count:,} {what}: one request validates at most {limit:,}"
                raise Invalid(detail, fields={"graph": [detail]}, code="over_budget")
    return graph


def validate_graph(graph: FabricGraph) -> dict[str, Any]:
    """Re-validate and re-measure an edited graph (instantly, nothing saved)."""
    try:
        report, metrics = evaluate(graph)
    except DesignerError as exc:
        raise Invalid(str(exc), fields={"graph": [str(exc)]}) from None
    result = PlanResult(
        options=_options_of(graph),
        graph=graph,
        errors=list(report.errors),
        warnings=list(report.warnings),
        metrics=metrics,
        topology=graph.topology,
    )
    summary = result.summary()
    return {"summary": summary, "issues": summary["issues"]}


def _options_of(graph: FabricGraph) -> PlanOptions:
    return PlanOptions(
        topology=graph.topology
        if graph.topology in ("fat-tree", "rail-optimized", "torus", "dragonfly-plus")
        else "fat-tree"
    )


def add_revision(
    actor: Actor,
    principal: Principal,
    design: Design,
    *,
    graph_data: Any,
    message: str = "",
    budget: Budget | None = None,
) -> DesignRevision:
    """Save an edited graph as the design's next revision (validation findings kept); a web
    request's graph is held to ``budget``."""
    require_operator(principal, to="change designs and the catalogue")
    graph = graph_from_payload(graph_data, budget=budget)
    checked = validate_graph(graph)
    with transaction.atomic():
        return _save_revision(actor, design, graph, checked["summary"], message or "edited", principal.user_id)


def import_ibnetdiscover(
    actor: Actor,
    principal: Principal,
    *,
    name: str,
    text: str,
    description: str = "",
    node_name_map: str | None = None,
    host_types: str | None = None,
    progress: Progress | None = None,
) -> tuple[Design, DesignRevision]:
    """A brownfield fabric: ibnetdiscover output (and a node-name map) → a design with one revision.
    ``host_types`` (``PATTERN NODE_TYPE`` lines) gives the hosts their server type and GPUs.

    The revision's summary carries ``warnings`` one line per kind, ``warnings_full`` every finding
    and ``import`` what was inferred (tiers, rails, SUs, oversubscription, rates, chassis).
    ``progress(step, percent)`` hears each phase start (:mod:`designer.import_jobs` shows it).
    """
    require_operator(principal, to="change designs and the catalogue")
    say = progress or (lambda _step, _percent: None)
    try:
        result = import_fabric(
            text, load_catalogue(), node_name_map=node_name_map, host_types=host_types, progress=progress
        )
    except NodeNameMapError as exc:
        raise Invalid(f"node-name map: {exc}", fields={"node_name_map": [str(exc)]}) from None
    except HostTypesError as exc:
        raise Invalid(f"host types: {exc}", fields={"host_types": [str(exc)]}) from None
    except DesignerError as exc:
        raise Invalid(str(exc), fields={"text": [str(exc)]}) from None
    graph = result.graph
    say("validating", 60)
    checked = validate_graph(graph)
    summary = import_summary(
        checked["summary"],
        [f.as_dict() for f in result.findings],
        result.report(),
        [i.as_dict() for i in validate(graph, max_per_code=None).warnings],
    )
    say("saving the design", 85)
    try:
        with transaction.atomic():
            design = Design.objects.create(
                name=name,
                description=description,
                topology=graph.topology,
                options={"imported": "ibnetdiscover"},
                created_by_id=principal.user_id,
            )
            audit.record(actor, "design.import", design, after=audit.snapshot(design))
            revision = _save_revision(actor, design, graph, summary, "imported", principal.user_id)
    except IntegrityError as exc:
        raise Conflict(f"a design named {name!r} exists") from exc
    design.refresh_from_db()
    return design, revision


def assign_node_types(actor: Actor, principal: Principal, design: Design, host_types: str) -> DesignRevision:
    """Say which hosts of a design are which servers (``PATTERN NODE_TYPE`` lines or a
    ``host,node_type`` CSV: :mod:`designer.imports.host_types`), in bulk, after its import: the
    next revision, its hosts with the catalogue's GPUs, so it can back an inventory and pools.
    400 naming the line; 400 when no host matches (nothing to save)."""
    require_operator(principal, to="change designs and the catalogue")
    revision = design.revisions.order_by("-number").first()
    if revision is None:
        raise Invalid(f"design {design.name} has no revision")
    graph = revision_graph(revision)
    try:
        changed = apply_host_types(graph, parse_host_types(host_types, graph.catalogue))
    except HostTypesError as exc:
        raise Invalid(f"host types: {exc}", fields={"host_types": [str(exc)]}) from None
    if not changed:
        raise Invalid("no host of the design matches these host types", fields={"host_types": ["no host matches"]})
    checked = validate_graph(graph)
    counts = Counter(changed.values())
    message = "node types: " + ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
    with transaction.atomic():
        return _save_revision(actor, design, graph, checked["summary"], message, principal.user_id)


def delete_design(actor: Actor, principal: Principal, design: Design) -> None:
    require_operator(principal, to="change designs and the catalogue")
    with transaction.atomic():
        audit.record(actor, "design.delete", design, before=audit.snapshot(design))
        design.delete()


def revision_graph(revision: DesignRevision) -> FabricGraph:
    return graph_from_dict(revision.graph, load_catalogue())


#: Seconds a computed canvas view stays cached (revisions are immutable; a catalogue change
#: changes the key).
CANVAS_CACHE_SECONDS = 3600


def revision_canvas(revision_id: int, level: str, focus: str | None, diff_from_id: int | None = None) -> dict:
    """The canvas view of a saved revision (designer.canvas.canvas_view), cached per level and focus.

    A revision never changes, so its views are computed once: the 16,384-GPU graph takes seconds
    to load and index, its fabric level is a few kilobytes. The key holds the catalogue's state
    (overrides change port counts); the graph is loaded from the database only on a miss.
    """
    from designer.canvas import canvas_view

    stamp = CatalogueEntry.objects.aggregate(n=Count("id"), at=Max("updated_at"))
    key = f"designer:canvas:{revision_id}:{diff_from_id}:{level}:{focus}:{stamp['n']}:{stamp['at']}"
    view = cache.get(key)
    if view is None:
        graph = revision_graph(DesignRevision.objects.get(pk=revision_id))
        old = revision_graph(DesignRevision.objects.get(pk=diff_from_id)) if diff_from_id else None
        view = canvas_view(graph, level, focus, diff_from=old)
        cache.set(key, view, CANVAS_CACHE_SECONDS)
    return view


def diff_revisions(a: DesignRevision, b: DesignRevision) -> dict[str, Any]:
    """Switches, nodes and cables added, removed and changed from revision a to b."""
    d = diff_graphs(revision_graph(a), revision_graph(b))
    return {
        "from": a.number,
        "to": b.number,
        "switches": {"added": d.added_switches, "removed": d.removed_switches, "changed": d.changed_switches},
        "nodes": {"added": d.added_nodes, "removed": d.removed_nodes},
        "cables": {"added": d.added_links, "removed": d.removed_links, "changed": d.changed_links},
        "empty": d.empty,
    }


def save_catalogue_entry(
    actor: Actor, principal: Principal, *, kind: str, name: str, data: dict[str, Any]
) -> CatalogueEntry:
    """Add or override a catalogue item; refused when it does not describe a valid item.

    Names match in any case: `qm9700` updates the entry or overrides the built-in `QM9700` and is
    saved under that spelling.
    """
    require_operator(principal, to="change designs and the catalogue")
    cls = ITEM_TYPES[kind]
    try:
        probe = dict(data, name=name)
        if cls is SwitchModel:
            probe["split_modes"] = {k: tuple(v) for k, v in probe.get("split_modes", {}).items()}
        cls(**probe)
    except (TypeError, ValueError, AttributeError) as exc:
        raise Invalid(f"not a valid {kind}: {exc}", fields={"data": [str(exc)]}) from None
    with transaction.atomic():
        entries = CatalogueEntry.objects.select_for_update().filter(kind=kind)
        entry = entries.filter(name=name).first() or entries.filter(name__iexact=name).order_by("pk").first()
        before = audit.snapshot(entry) if entry else None
        if entry is None:
            builtin = find_item(_builtin_items(kind), name)
            entry = CatalogueEntry(kind=kind, name=builtin.name if builtin else name)
        entry.data = data
        entry.save()
        audit.record(actor, "catalogue.save", entry, before=before, after=audit.snapshot(entry))
    return entry


def _builtin_items(kind: str) -> dict[str, Any]:
    tables: dict[str, dict[str, Any]] = {
        CatalogueEntry.Kind.SWITCH: DEFAULT_CATALOGUE.switches,
        CatalogueEntry.Kind.NODE: DEFAULT_CATALOGUE.nodes,
        CatalogueEntry.Kind.CABLE: DEFAULT_CATALOGUE.cables,
        CatalogueEntry.Kind.TRANSCEIVER: DEFAULT_CATALOGUE.transceivers,
    }
    return tables[kind]


def delete_catalogue_entry(actor: Actor, principal: Principal, entry: CatalogueEntry) -> None:
    require_operator(principal, to="change designs and the catalogue")
    with transaction.atomic():
        audit.record(actor, "catalogue.delete", entry, before=audit.snapshot(entry))
        entry.delete()
