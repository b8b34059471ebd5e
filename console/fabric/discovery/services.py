"""Discovery and compare of a managed fabric: the services the CLI, the API and the page call.

``discover`` sweeps the fabric with ibnetdiscover through its driver (the lab's diags for a lab
fabric, the local HCA for an OpenSM host), parses it with the project's parser, stores the
discovered topology in the design's names with real GUIDs, LIDs and rates, checks which routing
engine OpenSM really uses, and compares with the design — all on one :class:`DiscoveryRun`.
``compare`` answers with the comparison of a current discovery: it discovers afresh when the
stored one is too old or OpenSM swept since (:mod:`console.fabric.discovery.freshness`), reuses
it when asked to, and always says which discovery it compared, when it ran and how old it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from django.db import transaction
from django.db.models import OuterRef, Subquery

from console.fabric.discovery import freshness, sources
from console.fabric.discovery.compare import (
    LAB_SPEED_POLICY,
    DesignedLink,
    SpeedPolicy,
    compare_topology,
    designed_links,
    discovered_topology,
)
from console.fabric.discovery.sources import DiscoveryFailed
from console.fabric.drivers.base import Progress, no_progress
from console.fabric.models import DiscoveryRun, Fabric, FabricAgent
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError, Invalid, NotFound
from designer.errors import ParseError
from designer.graph import FabricGraph
from designer.imports.health import validate
from designer.imports.ibnetdiscover import parse_ibnetdiscover
from designer.imports.model import Discovery
from designer.models import DesignRevision
from designer.services import revision_graph


@lru_cache(maxsize=8)
def _design(revision_pk: int, created_at: float) -> tuple[FabricGraph, tuple[DesignedLink, ...]]:
    # Revisions are immutable, so their graph and cable plan are cached per revision.
    graph = revision_graph(DesignRevision.objects.get(pk=revision_pk))
    return graph, tuple(designed_links(graph))


def design_of(fabric: Fabric) -> tuple[FabricGraph, tuple[DesignedLink, ...]]:
    """The fabric's designed graph and cables."""
    revision = fabric.revision
    return _design(revision.pk, revision.created_at.timestamp())


def _speed_policy(fabric: Fabric) -> SpeedPolicy:
    return LAB_SPEED_POLICY if fabric.driver == Fabric.Driver.LAB else SpeedPolicy()


def _document(fabric: Fabric, run: DiscoveryRun, comp: dict[str, Any]) -> dict[str, Any]:
    routing = run.routing or {"configured": None, "in_use": None, "fallback": False, "evidence": []}
    return {
        "fabric_id": fabric.pk,
        "discovery_id": run.pk,
        "discovered_at": run.created_at.isoformat(),
        "driver": fabric.driver,
        "design": fabric.revision.design.name,
        "revision": fabric.revision.number,
        **comp,
        "routing": routing,
        "ok": bool(comp["ok"] and not routing.get("fallback")),
    }


def discover(fabric: Fabric, *, actor: Actor, progress: Progress = no_progress) -> DiscoveryRun:
    """Sweep the fabric now (on its SM host: :mod:`~console.fabric.discovery.sources`); store
    topology, routing check and comparison on a new run. ``progress(step, "running")`` as each
    step starts."""
    return discover_with(fabric, actor=actor, progress=progress)[0]


def discover_with(fabric: Fabric, *, actor: Actor, progress: Progress = no_progress) -> tuple[DiscoveryRun, Discovery]:
    """:func:`discover`, and what the wire reported as parsed (fabric validation reads more of it)."""
    started = time.monotonic()
    sweep = sources.source_for(fabric).sweep(progress)
    swept = time.monotonic()
    progress("parsing", "running")
    try:
        disc = parse_ibnetdiscover(sweep.stdout)
    except ParseError as exc:
        raise DiscoveryFailed(f"ibnetdiscover output of {fabric.name}: {exc}") from exc
    progress("comparing with the design", "running")
    graph, plan = design_of(fabric)
    try:  # the site's names for GUIDs (rdma-core node-name-map text), if the fabric has one
        topology = discovered_topology(disc, graph, node_name_map=fabric.config.get("node_name_map"))
    except ParseError as exc:
        raise Invalid(f"node-name map of {fabric.name}: {exc}") from exc
    routing = sweep.routing
    comp = compare_topology(graph, topology, speed=_speed_policy(fabric), designed=plan)
    summary = {
        "switches": len(disc.switches),
        "cas": len(disc.cas),
        "links": len(topology["links"]),
        "ibnetdiscover_s": round(swept - started, 3),
        "lines": sweep.stdout.count("\n"),
        freshness.MARK_KEY: sweep.sm_mark,
        # fabric validation on what the wire reported (designer.imports.health)
        "validation": [v.as_dict() for v in validate(disc, sm_states(fabric))],
    }
    with transaction.atomic():
        run = DiscoveryRun.objects.create(
            fabric=fabric,
            duration_s=round(time.monotonic() - started, 3),
            topology=topology,
            summary=summary,
            routing=routing,
        )
        run.compare = _document(fabric, run, comp)
        DiscoveryRun.objects.filter(pk=run.pk).update(compare=run.compare)
        audit.record(
            actor, "fabric.discover", fabric, after={"discovery_id": run.pk, **summary, "ok": run.compare["ok"]}
        )
    return run, disc


def sm_states(fabric: Fabric) -> dict[str, str] | None:
    """SM host → the state its SM reports, from the agents connected now (None: no agent to ask)."""
    rows = FabricAgent.objects.filter(fabric=fabric, connected=True, revoked_at__isnull=True).exclude(sm_state="")
    states = dict(rows.values_list("name", "sm_state"))
    return states or None


def latest_run(fabric: Fabric) -> DiscoveryRun | None:
    """The fabric's most recent discovery, if any."""
    return DiscoveryRun.objects.filter(fabric=fabric).order_by("-created_at", "-id").first()


def latest_runs(fabrics: Iterable[Fabric]) -> dict[int, DiscoveryRun]:
    """:func:`latest_run` of many fabrics by fabric id, in one query (the fabrics page)."""
    newest = DiscoveryRun.objects.filter(fabric=OuterRef("pk")).order_by("-created_at", "-id").values("pk")[:1]
    latest_ids = Fabric.objects.filter(pk__in=[f.pk for f in fabrics]).annotate(run=Subquery(newest)).values("run")
    return {run.fabric_id: run for run in DiscoveryRun.objects.filter(pk__in=latest_ids)}


def compare_run(fabric: Fabric, run: DiscoveryRun) -> dict[str, Any]:
    """Designed vs discovered for ``run`` (stored on the run): ``{"fabric_id", "discovery_id",
    "discovered_at", "missing", "extra", "miswired", "mismatches", "fixes", "routing": {"configured",
    "in_use", "fallback", "evidence"}, "ok", …}``."""
    graph, plan = design_of(fabric)
    comp = compare_topology(graph, run.topology, speed=_speed_policy(fabric), designed=plan)
    document = _document(fabric, run, comp)
    if document != run.compare:
        DiscoveryRun.objects.filter(pk=run.pk).update(compare=document)
        run.compare = document
    return document


def compare(
    fabric: Fabric,
    run: DiscoveryRun | None = None,
    *,
    refresh: bool = True,
    actor: Actor | None = None,
    just_discovered: bool = False,
    fresh: Callable[[], DiscoveryRun] | None = None,
) -> dict[str, Any]:
    """The comparison of a current discovery, saying what it compares.

    Without ``run``: the stored discovery when it is current, else (``refresh``, the default) a
    new one first; ``refresh=False`` reuses the stored one however old (404 when there is none).
    With ``run``: that run (``just_discovered``: the caller ran it now). The answer adds ``discovered_at``, ``discovery_age_s``,
    ``discovered_now`` and ``freshness`` (limit, OpenSM swept since, stale, a note in words).
    ``fresh`` gets the new discovery when one is needed (default: :func:`discover` here; the web
    and the API pass a job's: :func:`console.fabric.discovery.jobs.through_job`).
    """
    if run is not None:
        current = freshness.assess(fabric, run)
        note = "discovered now" if just_discovered else f"compared discovery {run.pk} as asked: {current.why()}"
        return freshness.stamp(compare_run(fabric, run), current, discovered_now=just_discovered, note=note)
    stored = latest_run(fabric)
    before = freshness.assess(fabric, stored)
    if stored is not None and not before.stale:
        note = f"reused: {before.why()}"
        return freshness.stamp(compare_run(fabric, stored), before, discovered_now=False, note=note)
    if not refresh:
        if stored is None:
            raise NotFound(f"no discovery of {fabric.name} yet: run a discovery first")
        note = f"reused as asked, may be out of date: {before.why()}"
        return freshness.stamp(compare_run(fabric, stored), before, discovered_now=False, note=note)
    try:
        run = fresh() if fresh is not None else discover(fabric, actor=actor or Actor.system("fabric-compare"))
    except ConsoleError as exc:
        if stored is not None:  # say what can still be compared, never fall back silently
            exc.detail = f"{exc.detail} (the stored discovery can still be compared as it is: {before.why()})"
            exc.args = (exc.detail,)
        raise
    note = f"discovered now: {before.why()}"
    return freshness.stamp(compare_run(fabric, run), freshness.assess(fabric, run), discovered_now=True, note=note)
