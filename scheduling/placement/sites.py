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
site is ``start - now`` and ``W`` is the shortest wait of any candidate.

With ``near``, the gang goes to **the nearest candidate whose wait is at most W + P**: patience
is the extra wait the tenant accepts to run nearer its data. Hence:

* the nearest candidate can start now → it (``nearest_now``);
* another can start now (``W = 0``) → the nearest whose wait is at most ``P``: a nearer site
  that has room within the patience is waited for (``nearer_later``), else the nearest site
  with room now (``farther_now``) — waiting for any nearer one would exceed the patience;
* no candidate can start now → the nearest whose start is at most ``P`` after the soonest one:
  ``soonest`` when it is the soonest (ties go to the nearer), ``nearer_later`` when it waits
  longer than a farther site would (by at most ``P``);
* no candidate can ever hold it → ``none``.

Why not "the soonest site within patience": with the data at ``b``, ``b`` free in 30 min and
``a`` in 29 min, a patience of 1 h would then send the gang away from its data to gain one
minute, while the same patience keeps it at ``b`` when ``a`` is free *now*. Measuring patience
from the soonest start keeps one rule for both cases; with ``P = 0`` it is "soonest, nearest on
ties".

Without ``near``: the candidate that starts soonest, ties to the nearest to the pool's home site
(``home``, index 0 unless given); patience plays no part (rule ``soonest``).
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
    """Only nodes of the given sites (indices into the pool's :class:`SiteMap`). ``names``
    (the map's names, optional) only word :meth:`describe`: filters that differ by it alone are
    equal, so the engine's cache of what a filter admits is shared."""

    sites: frozenset[int]
    names: tuple[str, ...] = field(default=(), compare=False)

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return node.site in self.sites

    def describe(self) -> str:
        shown = [self.names[s] if s < len(self.names) else str(s) for s in sorted(self.sites)]
        return f"site={shown[0]}" if len(shown) == 1 else "site in {" + ", ".join(shown) + "}"


class SiteRule(StrEnum):
    """How the chosen site relates to the others (see the module docstring)."""

    NEAREST_NOW = "nearest_now"
    NEARER_LATER = "nearer_later"
    FARTHER_NOW = "farther_now"
    SOONEST = "soonest"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class SiteChoice:
    """The site a gang goes to (``None``: no site can hold it), when it can start there
    (``start``; ``None`` when no site), the :class:`SiteRule` that describes the choice, and the
    sentence a tenant reads. ``waits`` is true when it queues for a later start."""

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
    """Choose a site by the rule of the module docstring.

    ``starts`` maps each candidate site to the earliest start the engine can give the gang on that
    site alone (``<= now`` counts as now; ``None``: never). ``near`` and ``home`` are site indices
    (``near`` need not be a candidate: a dataset may sit at a site without nodes in the pool);
    ``patience`` is in seconds (``None`` = 0).
    """
    for site in starts:
        sites.latency(site, site)  # raises on an unknown candidate
    waits = {s: max(0.0, t - now) for s, t in starts.items() if t is not None}
    order = [s for s in sites.order_from(home if near is None else near) if s in starts]
    able = [s for s in order if s in waits]
    if not able:
        head = f"near {sites.names[near]}: " if near is not None else ""
        return SiteChoice(None, None, SiteRule.NONE, f"{head}no site of the pool can hold it")
    soonest = min(able, key=lambda s: (waits[s], order.index(s)))
    if near is None:
        start = now + waits[soonest]
        when = "now" if waits[soonest] == 0 else at_phrase(start, now)
        text = f"{sites.names[soonest]} has room soonest ({when})"
        if len(order) > 1:
            text += ", the site of the pool that can place it first"
        return SiteChoice(soonest, start, SiteRule.SOONEST, text, waits=start > now)
    budget = max(0.0, patience or 0.0)
    chosen = next(s for s in able if waits[s] <= waits[soonest] + budget)
    start = now + waits[chosen]
    text = _Explainer(sites, near, order, waits, now, budget).explain(chosen, soonest)
    if waits[chosen] == 0:
        rule = SiteRule.NEAREST_NOW if chosen == order[0] else SiteRule.FARTHER_NOW
    else:
        rule = SiteRule.NEARER_LATER if waits[soonest] < waits[chosen] else SiteRule.SOONEST
    return SiteChoice(chosen, start, rule, text, waits=start > now)


@dataclass(frozen=True, slots=True)
class _Explainer:
    """The sentences of :func:`choose_site` with a ``near`` site."""

    sites: SiteMap
    near: int
    order: Sequence[int]
    waits: Mapping[int, float]
    now: float
    budget: float

    def explain(self, chosen: int, soonest: int) -> str:
        names = self.sites.names
        name = names[chosen]
        head = f"near {names[self.near]}: "
        nearest = self.order[0]
        wait = self.waits[chosen]
        if wait == 0 and chosen == nearest:
            if chosen == self.near:
                return f"{head}{name} has room now, so it runs at {name}"
            return (
                f"{head}{name}, the nearest site of the pool{self.latency(chosen)}, has room now, so it runs at {name}"
            )
        if wait == 0:
            return (
                f"{head}{self.passed(nearest, soonest)}, so it runs now at {name}{self.latency(chosen)} "
                f"rather than waiting for {names[nearest]}"
            )
        if self.waits[soonest] < wait:
            other = names[soonest]
            if self.waits[soonest] == 0:
                text = (
                    f"{head}{name} has room {self.at(chosen)}, within {patience_phrase(self.budget)}, so it waits "
                    f"for {name} rather than running now at {other}{self.latency(soonest)}"
                )
            else:
                lag = duration_phrase(wait - self.waits[soonest])
                text = (
                    f"{head}no site has room now; {name} has room {self.at(chosen)}, {lag} after {other}, "
                    f"within {patience_phrase(self.budget)}, so it waits for {name} rather than for "
                    f"{other}{self.latency(soonest)}"
                )
            return text if chosen == nearest else f"{text}; {self.passed(nearest, soonest)}"
        text = f"{head}no site has room now; {name} has room soonest, {self.at(chosen)}, so it waits for {name}"
        if chosen == nearest:
            return text
        return f"{text}{self.latency(chosen)}; {self.passed(nearest, soonest)}"

    def passed(self, site: int, soonest: int) -> str:
        """Why the nearest site was passed over for one near ``soonest``'s start."""
        names = self.sites.names
        if site not in self.waits:
            return f"{names[site]} cannot hold it"
        text = f"{names[site]} has room only {self.at(site)}"
        if self.waits[soonest] == 0:
            return f"{text}, beyond {patience_phrase(self.budget)}"
        if self.budget == 0:
            return f"{text}, later than {names[soonest]}, and you gave no patience"
        return f"{text}, more than {patience_phrase(self.budget)} after {names[soonest]}"

    def at(self, site: int) -> str:
        return at_phrase(self.now + self.waits[site], self.now)

    def latency(self, site: int) -> str:
        return latency_note(self.sites, self.near, site)


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
