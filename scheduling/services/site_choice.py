"""Multi-site pools in the reserve path: where a request's data or users are (``near``), the site
its gang goes to, and the cost of spanning sites.

``near`` is a site (slug or name) or ``dataset:<name>``, a dataset of the requesting tenant (any
other name, another tenant's dataset included, is "unknown": nothing says whether it exists).
In a pool whose nodes are at more than one site, :func:`decide_at_sites` runs the one decision
(:func:`.decision.decide`) once per site with the node filter
:class:`~scheduling.placement.sites.OnSites`, gives each site's earliest start to the pure choice
(:func:`~scheduling.placement.sites.choose_site`: nearest now, nearer later within the request's
patience, or farther now) and, for a request that may span sites and finds no single site soon
enough, lets :func:`~scheduling.placement.sitespan.plan_span` pick the sites whose ring
all-reduce crosses the cheapest links. A pool at one site takes the plain decision unchanged.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from console.fabric.models import Fabric, Site, SiteLink
from console.tenancy.errors import Invalid
from console.tenancy.models import Tenant
from scheduling.models import Dataset, Pool, Quota
from scheduling.placement import Placement
from scheduling.placement.sites import OnSites, SiteChoice, SiteLinkSpec, SiteMap, SiteRule, choose_site
from scheduling.placement.sitespan import RingCost, best_ring, plan_span, span_needed
from scheduling.services.decision import Decision, ReservationRequest, decide, engine_request
from scheduling.services.snapshots import Snapshot
from scheduling.services.topology import NamedTopology

DATASET_PREFIX = "dataset:"
#: The rule a spanning placement reports (beside :class:`~scheduling.placement.sites.SiteRule`'s).
SPAN_RULE = "span"


@dataclass(frozen=True, slots=True)
class Near:
    """A resolved ``near``: the site (pk, slug) and the dataset (pk) it came from, if any."""

    text: str
    site_id: int
    slug: str
    dataset_id: int | None = None


@dataclass(frozen=True, slots=True)
class PoolSites:
    """A multi-site pool's sites as the pure core sees them, and the fabric behind each index."""

    sites: SiteMap
    #: Site index → the pool's fabrics at that site (pks, the home fabric first).
    fabrics: dict[int, tuple[int, ...]]
    #: The index of ``near`` (may be a site without nodes in the pool), or ``None``.
    near: int | None


@dataclass(frozen=True, slots=True)
class SiteNote:
    """What the site choice decided, for the reservation's row, its explanation and the API."""

    site: int | None
    slug: str
    fabric_id: int | None
    message: str
    rule: str
    starts: dict[str, str | None]
    span: dict[str, Any] | None = None

    def explanation(self) -> dict[str, Any]:
        """The ``site`` entry of a reservation's (or preview's) explanation."""
        body: dict[str, Any] = {"site": self.slug, "rule": self.rule, "message": self.message, "starts": self.starts}
        if self.span is not None:
            body["span"] = self.span
        return body


def resolve_near(tenant: Tenant, text: str) -> Near | None:
    """The site ``text`` names (slug or name, any case) or the site of the tenant's dataset
    ``dataset:<name>``; a 400 otherwise, which never says whether another tenant has it."""
    text = text.strip()
    if not text:
        return None
    if text.startswith(DATASET_PREFIX):
        name = text[len(DATASET_PREFIX) :].strip()
        row = Dataset.objects.filter(tenant=tenant, name=name).values_list("pk", "site_id", "site__slug").first()
        if row is None:
            raise Invalid("unknown dataset: near names no dataset of your tenant", fields={"near": ["unknown dataset"]})
        return Near(text, row[1], row[2], row[0])
    found = Site.objects.filter(slug__iexact=text).values_list("pk", "slug").first() or (
        Site.objects.filter(name__iexact=text).values_list("pk", "slug").first()
    )
    if found is None:
        raise Invalid(f"unknown site {text!r}", fields={"near": ["unknown site"]})
    return Near(text, found[0], found[1])


def is_multi_site(named: NamedTopology) -> bool:
    """Whether the pool's nodes are at more than one site."""
    return len(named.site_slugs) > 1


def pool_sites(named: NamedTopology, near: Near | None) -> PoolSites:
    """The pool's :class:`SiteMap` (site names: slugs, a fabric's name for a fabric without a
    site; ``near``'s site appended when the pool has no node there) with the links between them."""
    fabric_site: dict[int, int] = {}
    for node, fabric in zip(named.topology.nodes, named.node_fabric, strict=True):
        fabric_site.setdefault(fabric, node.site)
    rows = Fabric.objects.filter(pk__in=list(fabric_site)).values_list("pk", "name", "site_id")
    names = list(named.site_slugs)
    site_pk: dict[int, int] = {}
    fabrics: dict[int, list[int]] = {}
    for pk, name, site_id in sorted(rows):
        index = fabric_site[pk]
        fabrics.setdefault(index, []).append(pk)
        if site_id is None:
            names[index] = name
        else:
            site_pk[site_id] = index
    near_index = None
    if near is not None:
        if near.site_id not in site_pk:
            site_pk[near.site_id] = len(names)
            names.append(near.slug)
        near_index = site_pk[near.site_id]
    links = {
        (site_pk[a], site_pk[b]): SiteLinkSpec(latency, bandwidth, kind)
        for a, b, latency, bandwidth, kind in SiteLink.objects.filter(
            a_id__in=list(site_pk), b_id__in=list(site_pk)
        ).values_list("a_id", "b_id", "latency_us", "bandwidth_gbps", "kind")
    }
    return PoolSites(SiteMap(tuple(names), links), {i: tuple(f) for i, f in fabrics.items()}, near_index)


def span_report(where: PoolSites, split: Sequence[tuple[int, int]], cost: RingCost) -> dict[str, Any]:
    """A spanning placement as ``placement.span`` reports it: its split, ring and the inter-site
    cost of a ring all-reduce, with the sentence a tenant reads."""
    names = where.sites.names
    parts = ", ".join(f"{n} node{'s' if n != 1 else ''} at {names[s]}" for s, n in split)
    head = f"near {names[where.near]}: " if where.near is not None else ""
    message = (
        f"{head}no single site can hold it now, so it spans {len(split)} sites ({parts}); {cost.sentence(where.sites)}"
    )
    return {
        "sites": [names[s] for s, _ in split],
        "split": [{"site": names[s], "nodes": n} for s, n in split],
        "ring": [names[s] for s in cost.ring],
        "inter_site_links": cost.k,
        "allreduce_bytes": int(cost.allreduce_bytes),
        "allreduce_inter_site_s": cost.seconds,
        "total_latency_us": cost.total_latency_us,
        "message": message,
    }


def placed_span(named: NamedTopology, placement: Placement) -> dict[str, Any] | None:
    """The span report of a placement the queue made over several sites (``None``: one site)."""
    counts: dict[int, int] = {}
    for node in placement.node_ids:
        site = named.topology.nodes[node].site
        counts[site] = counts.get(site, 0) + 1
    if len(counts) < 2:
        return None
    where = pool_sites(named, None)
    cost = best_ring(where.sites, sorted(counts), placement.gpus)
    return span_report(where, [(s, counts[s]) for s in cost.ring], cost)


def patience_of(request: ReservationRequest, pool: Pool) -> float:
    """Seconds a request waits for a nearer site: its ``max_wait`` (asap) or the pool's default."""
    if not request.asap:
        return 0.0
    wait = request.max_wait if request.max_wait is not None else pool.default_max_wait
    return wait.total_seconds() if wait is not None else 0.0


def decide_at_sites(
    snap: Snapshot,
    request: ReservationRequest,
    tenant: Tenant,
    pool: Pool,
    quota: Quota | None,
    near: Near | None,
) -> tuple[Decision, SiteNote | None]:
    """The decision for ``request`` in a pool at several sites, and what the site choice said;
    the plain :func:`.decision.decide` (and no note) in a pool at one site. SHARP in a pool on
    several fabrics is a 400 (:func:`refuse_sharp_across_fabrics`)."""
    named = snap.named
    refuse_sharp_across_fabrics(request, pool, named)
    if not is_multi_site(named):
        return decide(snap, request, tenant, pool, quota), None
    where = pool_sites(named, near)
    names = where.sites.names
    candidates = range(len(named.site_slugs))
    decisions = {
        i: decide(snap, request, tenant, pool, quota, extra=(OnSites(frozenset({i}), names),)) for i in candidates
    }
    first = next(iter(decisions.values()))
    if first.code in {
        "no_quota",
        "over_quota",
        "class_not_allowed",
        "over_high_priority_share",
        "invalid",
    }:  # the pool's
        return first, None
    at = first.start.timestamp()
    starts = {i: _start_of(d, request.asap) for i, d in decisions.items()}
    patience = patience_of(request, pool)
    choice = choose_site(starts, where.sites, now=at, near=where.near, patience=patience)
    if request.span_sites and span_needed(choice, now=at, patience=patience):
        spanned = _span(snap, request, tenant, pool, quota, where, decisions)
        if spanned is not None:
            return spanned
        if choice.site is None:  # larger than any one site: the whole pool's answer (it may queue)
            home = where.near if where.near in decisions else 0
            return decide(snap, request, tenant, pool, quota), _note(where, home, choice, starts)
    # No site can ever hold it: the refusal of the near site (else the home site) explains it.
    chosen = choice.site if choice.site is not None else (where.near if where.near in decisions else 0)
    decision = decisions[chosen]
    return decision, _note(where, chosen, choice, starts)


def refuse_sharp_across_fabrics(request: ReservationRequest, pool: Pool, named: NamedTopology) -> None:
    """A 400 for a SHARP request in a pool whose nodes are on several fabrics (sites). Aggregation
    trees are a subnet's: its switches, held by the fabric's reservations
    (:func:`.sharp.sharp_guard` counts the pool's fabric's, the SHARP lock covers that fabric's
    pools, the SHARP AM files name that fabric's switches), so a tree can be neither accounted nor
    configured on the pool's other fabrics, and no tree crosses from one subnet to another."""
    if not request.constraints.get("sharp"):
        return
    fabrics = len(set(named.node_fabric))
    if fabrics > 1:
        raise Invalid(
            f"SHARP is not offered in pool {pool.name!r}: its nodes are on {fabrics} fabrics, and a SHARP "
            "aggregation tree stays within one fabric's switches; ask without SHARP, or in a pool on one fabric",
            fields={"sharp": ["not in a pool on several fabrics"]},
        )


def site_constraints(note: SiteNote | None) -> tuple[OnSites, ...]:
    """The node filter that keeps alternatives (offers) on the site chosen; none in a pool at one
    site or for a spanning placement."""
    if note is None or note.site is None or note.span is not None:
        return ()
    return (OnSites(frozenset({note.site})),)


def _start_of(decision: Decision, asap: bool) -> float | None:
    if decision.placed:
        return decision.start.timestamp()
    if not asap:
        return None
    earliest = getattr(decision.result, "details", {}).get("earliest_start")
    return float(earliest) if isinstance(earliest, int | float) else None


def _when(epoch: float | None) -> str | None:
    return None if epoch is None else dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat()


def _note(where: PoolSites, chosen: int, choice: SiteChoice, starts: dict[int, float | None]) -> SiteNote:
    names = where.sites.names
    fabrics = where.fabrics.get(chosen, ())
    return SiteNote(
        site=chosen,
        slug=names[chosen],
        fabric_id=fabrics[0] if fabrics else None,
        message=choice.explanation,
        rule=str(choice.rule),
        starts={names[i]: _when(t) for i, t in starts.items()},
    )


def _span(
    snap: Snapshot,
    request: ReservationRequest,
    tenant: Tenant,
    pool: Pool,
    quota: Quota | None,
    where: PoolSites,
    decisions: dict[int, Decision],
) -> tuple[Decision, SiteNote] | None:
    """Place the gang over the sites whose ring all-reduce is cheapest (fewest sites first)."""
    first = next(iter(decisions.values()))
    shape = snap.engine.shape(engine_request(request, first.start, first.end))
    if shape is None:
        return None
    found: dict[tuple[int, ...], Decision] = {}
    node_site = [n.site for n in snap.named.topology.nodes]

    def place(ring: tuple[int, ...]) -> dict[int, int] | None:
        decision = decide(snap, request, tenant, pool, quota, extra=(OnSites(frozenset(ring), where.sites.names),))
        if not isinstance(decision.result, Placement):
            return None
        found[ring] = decision
        counts: dict[int, int] = {}
        for node in decision.result.node_ids:
            counts[node_site[node]] = counts.get(node_site[node], 0) + 1
        return counts

    free = {i: sum(1 for s in node_site if s == i) for i in range(len(snap.named.site_slugs))}
    plan = plan_span(
        where.sites, shape.nodes, free=free, place=place, near=where.near, gpus_per_node=shape.gpus_per_node
    )
    if plan is None:
        return None
    decision = found[plan.cost.ring]
    used = tuple(site for site, _ in plan.split)
    cost = plan.cost if set(used) == set(plan.cost.ring) else best_ring(where.sites, used, plan.cost.ranks)
    span = span_report(where, plan.split, cost)
    message = str(span["message"])
    main = max(plan.split, key=lambda sn: sn[1])[0]
    starts = {i: _start_of(d, request.asap) for i, d in decisions.items()}
    note = _note(where, main, SiteChoice(main, decision.start.timestamp(), SiteRule.NONE, message), starts)
    return decision, replace(note, rule=SPAN_RULE, span=span)
