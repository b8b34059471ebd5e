"""Sites in the replay: the designed fabric's leaf groups split into sites, and jobs placed near
their data by the console's own site choice (:func:`scheduling.placement.sites.choose_site`).

Sites come from :func:`split_sites` (``--sites N``: the leaf groups, the SUs of a rail-optimised
design, in index order, cut into ``N`` contiguous runs as even as possible, the first runs taking
the extra group; every pair of sites joined by one link of the given latency and bandwidth) or
from a sites file (:func:`load_sites_file`, JSON)::

    {"sites": [{"name": "east", "sus": [0, 1, 2]}, {"name": "west", "sus": [3]}],
     "links": [{"a": "east", "b": "west", "latency_us": 2000, "bandwidth_gbps": 400,
                "kind": "ib_router"}]}

``sus`` are leaf-group indices (an SU in a rail-optimised design, a leaf in a plain fat tree);
every group belongs to exactly one site. A trace names a job's data site by name (``site``).

At its arrival, a job is given its site (:class:`SitePlanner`): the earliest start the engine can
give it on each site alone (its bookings: running jobs and the queue head's reservation), its
data site as ``near`` and the replay's patience (``max_wait_s``) go to ``choose_site``, and the
job is queued held to that site (:class:`~scheduling.placement.sites.OnSites`). A job allowed to
span (``span_sites``) that no site can start within its patience is split over the sites with free
nodes now by :func:`scheduling.placement.sitespan.plan_span` (held to those sites), or, when none
can hold it now, queued on every site. The estimate ignores jobs still queued ahead of it (they
hold no booking), as the console's does.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from scheduling.placement import PlacementEngine, PoolTopology, Request
from scheduling.placement.sites import LinkKind, OnSites, SiteLinkSpec, SiteMap, choose_site
from scheduling.placement.sitespan import plan_span, span_needed

from .stats import percentile

#: Link figures ``--sites N`` gives every pair of sites: a metro-distance IB router.
DEFAULT_LATENCY_US = 1000.0
DEFAULT_BANDWIDTH_GBPS = 400.0

#: Where a job ran, relative to its data: the rows of the locality report.
WHERE = ("data_site", "other_site", "spanning", "no_data_site")


@dataclass(frozen=True)
class ReplaySites:
    """The replay's sites: their map (names, links) and the site of each leaf group."""

    map: SiteMap
    site_of_group: tuple[int, ...]

    def apply(self, topology: PoolTopology) -> PoolTopology:
        """``topology`` with every node's ``site`` set from its leaf group."""
        if len(self.site_of_group) != len(topology.groups):
            raise ValueError(
                f"the sites cover {len(self.site_of_group)} leaf groups, the fabric has {len(topology.groups)}"
            )
        nodes = tuple(replace(n, site=self.site_of_group[n.leaf_group]) for n in topology.nodes)
        return PoolTopology(
            topology.name, nodes, topology.groups, topology.leaf_spines, topology.spines, topology.cores
        )

    def index(self, name: str) -> int:
        """The index of site ``name`` (``ValueError`` naming the known ones)."""
        found = self.map.index(name)
        if found is None:
            raise ValueError(f"unknown site {name!r}; the replay's sites are {', '.join(self.map.names)}")
        return found


def split_sites(
    topology: PoolTopology,
    count: int,
    *,
    latency_us: float = DEFAULT_LATENCY_US,
    bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS,
    kind: str = LinkKind.IB_ROUTER.value,
) -> ReplaySites:
    """``count`` sites ``site-1`` … ``site-N`` over the leaf groups in index order (see the
    module docstring), every pair linked with the given figures."""
    groups = len(topology.groups)
    if not 1 <= count <= groups:
        raise ValueError(f"--sites must be between 1 and the fabric's {groups} leaf groups, got {count}")
    base, extra = divmod(groups, count)
    site_of_group: list[int] = []
    for site in range(count):
        site_of_group += [site] * (base + (1 if site < extra else 0))
    link = SiteLinkSpec(latency_us, bandwidth_gbps, kind)
    links = {(a, b): link for a in range(count) for b in range(a + 1, count)}
    return ReplaySites(SiteMap(tuple(f"site-{i + 1}" for i in range(count)), links), tuple(site_of_group))


def load_sites_file(path: str | Path, topology: PoolTopology) -> ReplaySites:
    """Sites and links from a JSON file (format in the module docstring); ``ValueError`` naming
    the file and what is wrong."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        names = tuple(str(s["name"]) for s in data["sites"])
        site_of_group: dict[int, int] = {}
        for index, site in enumerate(data["sites"]):
            for group in site["sus"]:
                if not isinstance(group, int) or not 0 <= group < len(topology.groups):
                    raise ValueError(f"site {names[index]!r}: no leaf group {group!r}")
                if group in site_of_group:
                    raise ValueError(f"leaf group {group} is in two sites")
                site_of_group[group] = index
        links: dict[tuple[int, int], SiteLinkSpec] = {}
        for link in data.get("links", []):
            a, b = names.index(link["a"]), names.index(link["b"])
            kind = LinkKind(link.get("kind", LinkKind.IB_ROUTER.value)).value
            links[(a, b)] = SiteLinkSpec(float(link["latency_us"]), float(link["bandwidth_gbps"]), kind)
        missing = [g for g in range(len(topology.groups)) if g not in site_of_group]
        if missing:
            raise ValueError(f"leaf groups {missing} belong to no site")
        return ReplaySites(SiteMap(names, links), tuple(site_of_group[g] for g in range(len(topology.groups))))
    except (OSError, KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: {exc}") from None


def replay_sites(
    spec: str,
    topology: PoolTopology,
    *,
    latency_us: float = DEFAULT_LATENCY_US,
    bandwidth_gbps: float = DEFAULT_BANDWIDTH_GBPS,
) -> ReplaySites:
    """Sites from ``--sites``: a number (:func:`split_sites`) or a file (:func:`load_sites_file`)."""
    if spec.isdigit():
        return split_sites(topology, int(spec), latency_us=latency_us, bandwidth_gbps=bandwidth_gbps)
    return load_sites_file(spec, topology)


@dataclass(frozen=True, slots=True)
class SiteDecision:
    """What :class:`SitePlanner` decided for one job: the constraint that holds it to its
    site(s) and the rule (a :class:`~scheduling.placement.sites.SiteRule` value, or ``span``)."""

    constraint: OnSites
    rule: str


class SitePlanner:
    """Chooses each arriving job's site (see the module docstring)."""

    def __init__(self, sites: ReplaySites, engine: PlacementEngine, *, patience: float, span_sites: bool) -> None:
        self.sites = sites
        self.engine = engine
        self.patience = patience
        self.span_sites = span_sites
        self.every_site = OnSites(frozenset(range(len(sites.map))))

    def decide(self, request: Request, near: int | None, duration: float) -> SiteDecision | None:
        """The site(s) of ``request`` arriving now; ``None`` when it can never be placed."""
        engine = self.engine
        now = engine.now
        shape = engine.shape(request)
        if shape is None:
            return None
        starts: dict[int, float | None] = {}
        for site in range(len(self.sites.map)):
            held = replace(request, constraints=(*request.constraints, OnSites(frozenset({site}))))
            if shape.nodes > engine.eligibility(held, shape.gpus_per_node).nodes:
                starts[site] = None
                continue
            found = engine.earliest_window(held, after=now)
            starts[site] = None if found is None else found.start
        choice = choose_site(starts, self.sites.map, now=now, near=near, patience=self.patience)
        spans = self.span_sites and shape.whole and shape.nodes > 1
        if spans and span_needed(choice, now=now, patience=self.patience):
            elig = engine.eligibility(request, shape.gpus_per_node)
            counts = engine.whole_node_window(elig, now, now + duration).counts
            free: Counter[int] = Counter()
            for group, n in enumerate(counts):
                free[self.sites.site_of_group[group]] += n
            plan = plan_span(self.sites.map, shape.nodes, free=dict(free), near=near)
            if plan is not None:
                return SiteDecision(OnSites(frozenset(plan.sites)), "span" if len(plan.sites) > 1 else "soonest")
            if choice.site is None:
                return SiteDecision(self.every_site, "span")
        if choice.site is None:
            return None
        return SiteDecision(OnSites(frozenset({choice.site})), choice.rule.value)


def _waits(waits: Sequence[float]) -> dict[str, float | int]:
    return {
        "jobs": len(waits),
        "avg_wait_s": sum(waits) / len(waits) if waits else 0.0,
        "p95_wait_s": percentile(waits, 95),
    }


def where(near: int | None, sites: Sequence[int]) -> str:
    """Where a job ran relative to its data (one of :data:`WHERE`)."""
    if len(sites) > 1:
        return "spanning"
    if near is None:
        return "no_data_site"
    return "data_site" if tuple(sites) == (near,) else "other_site"


def locality_summary(placed: Iterable[tuple[int | None, tuple[int, ...], float, str]], count: int) -> dict[str, Any]:
    """The locality report of placed jobs given as ``(near, sites ran on, wait, rule)``."""
    rows = list(placed)
    with_data = [r for r in rows if r[0] is not None]
    at_data = [r for r in with_data if where(r[0], r[1]) == "data_site"]
    spanning = [r for r in rows if len(r[1]) > 1]
    by_where = {w: _waits([r[2] for r in rows if where(r[0], r[1]) == w]) for w in WHERE}
    return {
        "sites": count,
        "jobs_with_data_site": len(with_data),
        "at_data_site": len(at_data) / len(with_data) if with_data else 0.0,
        "spanning": len(spanning) / len(rows) if rows else 0.0,
        "wait_by_where": by_where,
        "rules": dict(sorted(Counter(r[3] for r in rows).items())),
    }


def locality_cost(result: dict[str, Any], baseline: dict[str, Any]) -> dict[str, float]:
    """The wait the data sites cost: this replay's against the same trace with no data sites."""
    return {
        "baseline_avg_wait_s": baseline["avg_wait_s"],
        "baseline_p95_wait_s": baseline["p95_wait_s"],
        "locality_wait_cost_s": result["avg_wait_s"] - baseline["avg_wait_s"],
        "locality_p95_cost_s": result["p95_wait_s"] - baseline["p95_wait_s"],
    }
