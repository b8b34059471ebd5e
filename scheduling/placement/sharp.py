"""SHARP-aware placement: a job asking for in-network reduction gets an aggregation tree.

NVIDIA SHARP reduces in the switches: a job's aggregation tree spans every switch from the
leaves its nodes sit on up to the lowest switch they all reach (the tree's root). A switch
serves a limited number of concurrent trees (the catalogue's ``sharp_trees`` per switch model,
from NVIDIA's SHARP release notes: one streaming-aggregation tree per Quantum switch, one per
port on Quantum-2), so SHARP jobs compete for trees as well as for nodes.

The model, in the engine's protocol:

* :class:`Sharp` is the request's constraint (``sharp: true``): a node filter that admits every
  node, so it marks the request and the guard below applies to it;
* :class:`SharpTrees` is the pool's gang guard: it leaves out the leaf groups whose leaves have
  no free tree over the request's window, places through the inner search, then picks a root
  (a spine all the job's leaves uplink to, and a core across pods) with a free tree; the
  placement it returns carries the tree's switches in :attr:`~.types.Placement.sharp`;
* :class:`SharpLedger` holds the trees: booking id → switches, each using one tree per switch.
  A hold counts while its booking is in the pool state and overlaps the window, so releasing
  or ending the booking frees its trees; the earliest-window search (the queue) finds the
  window in which enough trees are free because holds end with their bookings.

A gang of one node asks for no tree: its reduction stays on NVLink. Switches are named
``leaf<i>``, ``spine<j>``, ``core<k>`` with the topology's indices.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .protocol import EngineView, GangGuard, RawSearch
from .request import Request
from .topology import PoolTopology, TopoNode
from .types import NodeFilter, Placement, PlacementResult, Rejection

#: Rejection reason of a SHARP request no free aggregation tree can serve.
REASON_SHARP = "sharp"


def switch(kind: str, index: int) -> str:
    """A switch's name in a tree: ``leaf3``, ``spine0``, ``core1`` (``kind`` is leaf, spine or core)."""
    return f"{kind}{index}"


@dataclass(frozen=True, slots=True)
class Sharp(NodeFilter):
    """The request asks for a SHARP aggregation tree (every node passes; :class:`SharpTrees` decides)."""

    def admits(self, node: TopoNode, topology: PoolTopology) -> bool:
        return True

    def describe(self) -> str:
        return "SHARP"


class SharpLedger:
    """Aggregation trees per switch (``capacity``) and the trees bookings hold (see the module docstring)."""

    def __init__(self, capacity: Mapping[str, int]) -> None:
        self.capacity = dict(capacity)
        self.holds: dict[str, frozenset[str]] = {}
        self.windows: dict[str, tuple[float, float]] = {}

    def hold(self, booking_id: str, switches: Iterable[str], window: tuple[float, float] | None = None) -> None:
        """Record that ``booking_id`` uses one tree on each of ``switches``: over ``window``
        (a hold of another pool sharing the switches), else while the pool's booking of that id
        lasts."""
        self.holds[booking_id] = frozenset(switches)
        if window is not None:
            self.windows[booking_id] = window

    def release(self, booking_id: str) -> frozenset[str]:
        """Forget ``booking_id``'s trees (a booking gone from the state holds none anyway)."""
        self.windows.pop(booking_id, None)
        return self.holds.pop(booking_id, frozenset())

    def holders(
        self, host: EngineView, start: float, end: float, ignore: frozenset[str] = frozenset()
    ) -> dict[str, list[str]]:
        """Switch → the bookings holding one of its trees during ``[start, end)``."""
        out: dict[str, list[str]] = {}
        bookings = host.state.bookings
        for bid, switches in self.holds.items():
            booking = bookings.get(bid)
            window = self.windows.get(bid) or (booking and (booking.start, booking.end))
            if not window or bid in ignore or window[1] <= start or window[0] >= end:
                continue
            for switch in switches:
                out.setdefault(switch, []).append(bid)
        return out

    def free(self, switch: str, holders: Mapping[str, list[str]]) -> int:
        """Trees of ``switch`` no booking holds, given :meth:`holders`' answer."""
        return self.capacity.get(switch, 0) - len(holders.get(switch, ()))


class SharpTrees(GangGuard):
    """The pool's guard for SHARP requests (see the module docstring). ``names`` maps switch
    keys to the names a refusal quotes (the design's switch names); a key names itself by default."""

    def __init__(self, ledger: SharpLedger, names: Mapping[str, str] | None = None) -> None:
        self.ledger = ledger
        self.names = dict(names or {})

    def applies(self, request: Request) -> bool:
        return any(isinstance(f, Sharp) for f in request.node_filters)

    def booked(self, booking_id: str, placement: Placement) -> None:
        if placement.sharp:
            self.ledger.hold(booking_id, placement.sharp)

    def search(
        self,
        host: EngineView,
        request: Request,
        start: float,
        end: float,
        raw: RawSearch,
        *,
        explain: bool,
        ignore: frozenset[str],
    ) -> PlacementResult:
        shape = host.shape(request)
        if shape is not None and shape.nodes == 1:
            return raw(frozenset(), explain)  # one node reduces over NVLink: no tree
        topo = host.topology
        holders = self.ledger.holders(host, start, end, ignore)
        blocked = self.blocked(topo, holders)
        exclude = blocked
        last_full: str | None = None
        while True:
            result = raw(exclude, explain and last_full is None)
            if not isinstance(result, Placement):
                break
            tree, full = self.tree(topo, result, holders)
            if full is None:
                return dataclasses.replace(result, sharp=tree)
            # A full root: leave out the groups that needed it and search again (``exclude`` grows).
            last_full = full
            more = self._groups_behind(topo, result, full)
            if more <= exclude:
                return self.refusal(full, holders, start, end)
            exclude = exclude | more
        if last_full is not None:
            return self.refusal(last_full, holders, start, end)
        if not blocked:
            return result
        # Placeable without SHARP: the first full leaf the unrestricted placement would use is the reason.
        plain = raw(frozenset(), False)
        if isinstance(plain, Placement):
            full_leaf = next(
                (x for x in sorted(set(plain.leaves)) if self.ledger.free(switch("leaf", x), holders) <= 0), None
            )
            if full_leaf is not None:
                return self.refusal(switch("leaf", full_leaf), holders, start, end)
        return result

    def blocked(self, topo: PoolTopology, holders: Mapping[str, list[str]]) -> frozenset[int]:
        """Leaf groups with a leaf that has no free tree."""
        free = self.ledger.free
        return frozenset(g.id for g in topo.groups if any(free(switch("leaf", x), holders) <= 0 for x in set(g.leaves)))

    def tree(
        self, topo: PoolTopology, placement: Placement, holders: Mapping[str, list[str]]
    ) -> tuple[tuple[str, ...], str | None]:
        """The tree's switches (leaves, then spines, then the core), or the first full switch."""
        leaves = sorted(set(placement.leaves))
        switches = [switch("leaf", x) for x in leaves]
        full = next((s for s in switches if self.ledger.free(s, holders) <= 0), None)
        if full is not None or len(leaves) == 1:
            return tuple(switches), full
        pods = sorted({topo.groups[g].pod for g in placement.leaf_groups})
        group_of = {x: g.id for g in topo.groups for x in g.leaves}
        for pod in pods:
            pod_leaves = [x for x in leaves if topo.groups[group_of[x]].pod == pod]
            common = set.intersection(*(set(topo.leaf_spines.get(x, ())) for x in pod_leaves))
            best = self._roomiest((switch("spine", s) for s in sorted(common)), holders)
            if best is None:
                return tuple(switches), switch("spine", min(common)) if common else "spine?"
            switches.append(best)
        if len(pods) > 1:
            best = self._roomiest((switch("core", c) for c in range(topo.cores)), holders)
            if best is None:
                return tuple(switches), switch("core", 0)
            switches.append(best)
        return tuple(switches), None

    def _roomiest(self, candidates: Iterable[str], holders: Mapping[str, list[str]]) -> str | None:
        ranked = sorted(candidates, key=lambda s: -self.ledger.free(s, holders))
        return ranked[0] if ranked and self.ledger.free(ranked[0], holders) > 0 else None

    @staticmethod
    def _groups_behind(topo: PoolTopology, placement: Placement, full: str) -> frozenset[int]:
        """Leaf groups of ``placement`` whose tree needed the full switch ``full``."""
        if full.startswith("spine"):
            index = int(full.removeprefix("spine"))
            return frozenset(
                g
                for g in placement.leaf_groups
                if any(index in topo.leaf_spines.get(x, ()) for x in topo.groups[g].leaves)
            )
        return frozenset(placement.leaf_groups)

    def refusal(self, switch: str, holders: Mapping[str, list[str]], start: float, end: float) -> Rejection:
        """ "SHARP requested: spine3 has no free aggregation tree; 2 jobs hold its trees"."""
        held = len(holders.get(switch, ()))
        capacity = self.ledger.capacity.get(switch, 0)
        name = self.names.get(switch, switch)
        if capacity <= 0:
            why = f"{name} offers no aggregation tree (not SHARP-capable)"
        else:
            jobs = "1 job holds its tree" if held == 1 else f"{held} jobs hold its trees"
            why = f"{name} has no free aggregation tree; {jobs}"
        return Rejection(
            REASON_SHARP,
            f"SHARP requested: {why}",
            {"switch": name, "trees": capacity, "trees_held": held, "window_start": start, "window_end": end},
        )

    def passes(
        self, host: EngineView, request: Request, ignore: frozenset[str] = frozenset()
    ) -> tuple[list[frozenset[int]], Callable[[Iterable[int]], bool]]:
        # Reclaim plans on counts: offer it only the groups whose leaves have a free tree now.
        holders = self.ledger.holders(host, host.state.now, host.state.now + 1, ignore)
        topo = host.topology
        blocked = self.blocked(topo, holders)
        return [blocked], lambda groups: not (set(groups) & blocked)


def capacity_of(topology: PoolTopology, leaves: int, spines: int, cores: int) -> dict[str, int]:
    """Uniform capacities: ``leaves`` trees per leaf, ``spines`` per spine, ``cores`` per core."""
    out = {switch("leaf", x): leaves for g in topology.groups for x in g.leaves}
    out.update({switch("spine", s): spines for s in range(topology.spines)})
    out.update({switch("core", c): cores for c in range(topology.cores)})
    return out


__all__ = ["REASON_SHARP", "Sharp", "SharpLedger", "SharpTrees", "capacity_of", "switch"]
