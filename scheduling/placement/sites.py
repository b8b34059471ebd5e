"""Sites of a multi-site pool: the links between them, a node filter, and the choice of a site.

A pool's nodes may sit in several sites (data centres), each a fabric or several, joined by IB
routers, IB gateways or Ethernet. :class:`SiteMap` is the pool's sites (index → name) and the
links between them; :class:`OnSites` keeps a gang on some of them (the engine places "on site
``i`` alone" with ``OnSites(frozenset({i}))``); :func:`choose_site` picks the site a gang goes to
from the earliest start the engine can give it on each site alone. Spanning several sites (ring
all-reduce cost, the split of a gang over sites) is in :mod:`.sitespan`.

Latency between two sites is that of the lowest-latency route over the links (direct, or through
other sites); its bandwidth is the route's narrowest link. Sites with no route between them are
*unconnected*: infinite latency, ordered last.

The choice: nearer-later vs farther-now
---------------------------------------
Inputs: per candidate site its earliest start (``now``, a later time, or ``None`` = never: too
large or no eligible nodes there), ``near`` (a site index, or ``None``) and the request's
patience ``P`` in seconds (``None`` is no patience: the same as ``0``, as in the console's queue,
where a request without ``max_wait`` does not wait for a better placement). Candidates are taken
in :meth:`SiteMap.order_from` order (nearest to ``near`` first, ties by index); the wait of a
site is ``start - now``.

With ``near``:

1. **nearest-now**: the nearest candidate can start now → that site.
2. **nearer-later**: else, among the candidates *nearer than the nearest one that can start now*
   (all candidates when none can), those whose wait is at most ``P``: the one that starts
   soonest (ties: the nearer) → queue for it. Patience is what the tenant pays for locality:
   a nearer site is worth waiting for as long as the wait stays within it.
3. **farther-now**: else, the nearest candidate that can start now (every nearer one would make
   the gang wait longer than ``P``, or can never hold it).
4. **soonest**: else (no candidate starts now nor within ``P``): the candidate that starts
   soonest, ties to the nearer → queue for it.
5. **none**: no candidate can ever hold the gang.

Without ``near``: the candidate that starts soonest, ties to the nearest to the pool's home site
(``home``, index 0 unless given); patience plays no part.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .topology import PoolTopology, TopoNode
from .types import NodeFilter, format_time


class LinkKind(StrEnum):
    """How two sites are joined (the values of ``console.fabric.models.SiteLink.kind``)."""

    IB_ROUTER = "ib_router"
    IB_GATEWAY = "ib_gateway"
    ETHERNET = "ethernet"


@dataclass(frozen=True, slots=True)
class SiteLinkSpec:
    """A link between two sites: one-way latency in microseconds, bandwidth in Gb/s (bits), and
    its kind (a :class:`LinkKind` value; a route over several links joins their kinds with
    ``+``)."""

    latency_us: float
    bandwidth_gbps: float
    kind: str = LinkKind.IB_ROUTER.value


@dataclass(frozen=True)
class SiteMap:
    """A pool's sites (``names[i]`` is site ``i``) and the links between pairs of them.

    ``links`` is keyed by a pair of site indices in either order (one entry per pair). Routes
    (:meth:`route`) are computed once, by lowest total latency.
    """

    names: tuple[str, ...]
    links: Mapping[tuple[int, int], SiteLinkSpec] = field(default_factory=dict)
    _routes: dict[tuple[int, int], SiteLinkSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.names)
        for a, b in self.links:
            if not (0 <= a < n and 0 <= b < n) or a == b:
                raise ValueError(f"link ({a}, {b}) does not join two distinct sites of {n}")
        object.__setattr__(self, "_routes", _shortest_routes(n, self.links))

    def __len__(self) -> int:
        return len(self.names)

    def index(self, name: str) -> int | None:
        """The index of the site named ``name``, or ``None``."""
        try:
            return self.names.index(name)
        except ValueError:
            return None

    def route(self, a: int, b: int) -> SiteLinkSpec | None:
        """The lowest-latency route from ``a`` to ``b`` as one link (latency summed, bandwidth
        of its narrowest link, kinds joined); ``None`` for ``a == b`` or unconnected sites."""
        self._check(a)
        self._check(b)
        return self._routes.get((a, b))

    def latency(self, a: int, b: int) -> float:
        """One-way latency in µs from site ``a`` to site ``b``: 0 for the same site, ``inf``
        when no route joins them."""
        if a == b:
            self._check(a)
            return 0.0
        spec = self.route(a, b)
        return math.inf if spec is None else spec.latency_us

    def order_from(self, near: int | None) -> tuple[int, ...]:
        """Every site, nearest to ``near`` first (``near`` itself first), ties and unconnected
        sites by index; index order when ``near`` is ``None``."""
        if near is None:
            return tuple(range(len(self.names)))
        self._check(near)
        return tuple(sorted(range(len(self.names)), key=lambda s: (self.latency(near, s), s)))

    def _check(self, site: int) -> None:
        if not 0 <= site < len(self.names):
            raise ValueError(f"unknown site index {site} (the pool has {len(self.names)} sites)")


def _shortest_routes(n: int, links: Mapping[tuple[int, int], SiteLinkSpec]) -> dict[tuple[int, int], SiteLinkSpec]:
    # Floyd-Warshall on latency: a handful of sites, computed once per map.
    best: dict[tuple[int, int], SiteLinkSpec] = {}
    for (a, b), spec in links.items():
        for key in ((a, b), (b, a)):
            if key not in best or spec.latency_us < best[key].latency_us:
                best[key] = spec
    for k in range(n):
        for i in range(n):
            first = best.get((i, k))
            if first is None or i == k:
                continue
            for j in range(n):
                second = best.get((k, j))
                if second is None or j in (i, k):
                    continue
                latency = first.latency_us + second.latency_us
                current = best.get((i, j))
                if current is None or latency < current.latency_us:
                    best[(i, j)] = SiteLinkSpec(
                        latency, min(first.bandwidth_gbps, second.bandwidth_gbps), f"{first.kind}+{second.kind}"
                    )
    return best


@dataclass(frozen=True, slots=True)
class OnSites(NodeFilter):
    """Only nodes of the given sites (indices into the pool's :class:`SiteMap`)."""

    sites: frozenset[int]

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return node.site in self.sites

    def describe(self) -> str:
        return "site in {" + ", ".join(str(s) for s in sorted(self.sites)) + "}"


class SiteRule(StrEnum):
    """Which rule of the module docstring chose the site."""

    NEAREST_NOW = "nearest_now"
    NEARER_LATER = "nearer_later"
    FARTHER_NOW = "farther_now"
    SOONEST = "soonest"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class SiteChoice:
    """The site a gang goes to (``None``: no site can hold it), when it can start there
    (``start``; ``None`` when no site), the :class:`SiteRule` that chose it, and the sentence a
    tenant reads. ``waits`` is true when it queues for a later start."""

    site: int | None
    start: float | None
    rule: SiteRule
    explanation: str
    waits: bool = False


def choose_site(
    starts: Mapping[int, float | None],
    sites: SiteMap,
    *,
    now: float,
    near: int | None = None,
    patience: float | None = None,
    home: int = 0,
) -> SiteChoice:
    """Choose a site by the rules of the module docstring.

    ``starts`` maps each candidate site to the earliest start the engine can give the gang on that
    site alone (``<= now`` counts as now; ``None``: never). ``near`` and ``home`` are site indices
    (``near`` need not be a candidate: a dataset may sit at a site without nodes in the pool);
    ``patience`` is in seconds (``None`` = 0).
    """
    for site in starts:
        sites.latency(site, site)  # raises on an unknown candidate
    budget = max(0.0, patience or 0.0)
    waits = {s: (None if t is None else max(0.0, t - now)) for s, t in starts.items()}
    if near is None:
        order = [s for s in sites.order_from(home) if s in starts]
        return _soonest(order, waits, now, sites, None, SiteRule.SOONEST)
    order = [s for s in sites.order_from(near) if s in starts]
    if not order:
        return _none(sites, near)
    nearest = order[0]
    if waits[nearest] == 0.0:
        return _pick(nearest, now, now, SiteRule.NEAREST_NOW, _nearest_now(sites, near, nearest))
    now_sites = [s for s in order if waits[s] == 0.0]
    nearer = order[: order.index(now_sites[0])] if now_sites else order
    within = [s for s in nearer if (w := waits[s]) is not None and w <= budget]
    if within:
        best = min(within, key=lambda s: (waits[s], order.index(s)))
        text = _nearer_later(sites, near, best, now + _w(waits[best]), now, budget, now_sites[:1], order, waits)
        return _pick(best, now + _w(waits[best]), now, SiteRule.NEARER_LATER, text)
    if now_sites:
        farther = now_sites[0]
        return _pick(
            farther, now, now, SiteRule.FARTHER_NOW, _farther_now(sites, near, farther, nearest, now, budget, waits)
        )
    return _soonest(order, waits, now, sites, near, SiteRule.SOONEST, budget)


def _w(wait: float | None) -> float:
    return 0.0 if wait is None else wait


def _pick(site: int, start: float, now: float, rule: SiteRule, text: str) -> SiteChoice:
    return SiteChoice(site, start, rule, text, waits=start > now)


def _none(sites: SiteMap, near: int | None) -> SiteChoice:
    head = f"near {sites.names[near]}: " if near is not None else ""
    return SiteChoice(None, None, SiteRule.NONE, f"{head}no site of the pool can hold it")


def _soonest(
    order: Sequence[int],
    waits: Mapping[int, float | None],
    now: float,
    sites: SiteMap,
    near: int | None,
    rule: SiteRule,
    budget: float = 0.0,
) -> SiteChoice:
    able = [s for s in order if waits[s] is not None]
    if not able:
        return _none(sites, near)
    best = min(able, key=lambda s: (_w(waits[s]), order.index(s)))
    start = now + _w(waits[best])
    name = sites.names[best]
    if near is None:
        when = "now" if start <= now else at_phrase(start, now)
        text = f"{name} has room soonest ({when})"
        if len(order) > 1:
            text += ", the site of the pool that can place it first"
        return SiteChoice(best, start, rule, text, waits=start > now)
    head = f"near {sites.names[near]}: "
    text = (
        f"{head}no site has room now or within {patience_phrase(budget)}; {name} has room soonest, "
        f"{at_phrase(start, now)}, so it waits for {name}{latency_note(sites, near, best)}"
    )
    return SiteChoice(best, start, rule, text, waits=True)


def _nearest_now(sites: SiteMap, near: int, site: int) -> str:
    name = sites.names[site]
    if site == near:
        return f"near {name}: {name} has room now, so it runs at {name}"
    return (
        f"near {sites.names[near]}: {name}, the nearest site of the pool{latency_note(sites, near, site)}, "
        f"has room now, so it runs at {name}"
    )


def _nearer_later(
    sites: SiteMap,
    near: int,
    site: int,
    start: float,
    now: float,
    budget: float,
    now_sites: Sequence[int],
    order: Sequence[int],
    waits: Mapping[int, float | None],
) -> str:
    name = sites.names[site]
    text = f"near {sites.names[near]}: {name} has room {at_phrase(start, now)}, within {patience_phrase(budget)}, "
    if now_sites:
        other = now_sites[0]
        text += (
            f"so it waits for {name} rather than running now at {sites.names[other]}{latency_note(sites, near, other)}"
        )
    else:
        text += f"and no site has room now, so it waits for {name}"
    if order[0] != site:
        text += "; " + _passed_over(sites, order[0], waits, now)
    return text


def _farther_now(
    sites: SiteMap, near: int, site: int, nearest: int, now: float, budget: float, waits: Mapping[int, float | None]
) -> str:
    name, nearest_name = sites.names[site], sites.names[nearest]
    wait = waits[nearest]
    if wait is None:
        reason = f"{nearest_name} cannot hold it"
    else:
        reason = f"{nearest_name} has room only {at_phrase(now + wait, now)}, beyond {patience_phrase(budget)}"
    return (
        f"near {sites.names[near]}: {reason}, so it runs now at {name}{latency_note(sites, near, site)} "
        f"rather than waiting for {nearest_name}"
    )


def _passed_over(sites: SiteMap, site: int, waits: Mapping[int, float | None], now: float) -> str:
    wait = waits[site]
    name = sites.names[site]
    if wait is None:
        return f"{name} is nearer but cannot hold it"
    return f"{name} is nearer but has room only {at_phrase(now + wait, now)}"


def latency_note(sites: SiteMap, near: int, site: int) -> str:
    """`` (latency 2,000 µs)`` from ``near`` to ``site``; `` (no link known)`` when unconnected;
    empty for the same site."""
    if near == site:
        return ""
    latency = sites.latency(near, site)
    if math.isinf(latency):
        return f" (no link known from {sites.names[near]})"
    return f" (latency {latency:,.0f} µs)"


def duration_phrase(seconds: float) -> str:
    """``35 min``, ``1 h``, ``1 h 30 min``, ``45 s``, ``2 d 3 h`` (rounded to the unit shown)."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h" + (f" {rest} min" if rest else "")
    days, hours = divmod(hours, 24)
    return f"{days} d" + (f" {hours} h" if hours else "")


def patience_phrase(budget: float) -> str:
    """``your patience of 1 h``, or ``your patience (none)`` for zero."""
    return f"your patience of {duration_phrase(budget)}" if budget > 0 else "your patience (none)"


def at_phrase(start: float, now: float) -> str:
    """``at 14:05 UTC (in 35 min)`` for epoch times, ``at t=2100s (in 35 min)`` in a simulation."""
    when = format_time(start)
    if start >= 1e9:
        when += " UTC"
    return f"at {when} (in {duration_phrase(start - now)})"
