"""Occupancy of a pool over time: bookings as half-open intervals on GPUs, plus a "now" view.

Every booking holds a set of GPUs (a bit mask per node) over ``[start, end)``. Whole-node
bookings simply hold every bit. Two bookings may share a node only if their masks are disjoint or
their windows do not overlap; :meth:`PoolState.book` refuses anything else, so the state can
never double-book a GPU whatever the caller does.

Placement asks mostly about "now". Scanning every node's interval list for that would cost
O(bookings) per decision, so the state keeps, incrementally, each node's busy mask at ``now``
and per leaf group the count of wholly free nodes and of free GPUs. Bookings that start later
are tracked per node (``future``) so a "now" request that runs into one can be checked on just
those nodes. :meth:`advance` moves ``now`` forward by replaying start/end events from a heap.

For topology-shaped guarantees (:mod:`.guarantees`) the state also keeps, per leaf group, how
many non-borrowed bookings each tenant has there (``group_holders``), whatever their windows.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from .topology import NodeState, PoolTopology
from .types import Owner

# Event kinds; ends sort before starts at the same instant so a node handed over at time t is
# never seen as held twice.
_END = 0
_START = 1

#: One interval on one node: (start, end, gpu mask, booking id).
Entry = tuple[float, float, int, str]


class BookingConflict(Exception):
    """A booking would overlap another on some GPU; nothing was changed."""


@dataclass(slots=True, eq=False)
class Booking:
    """A reservation's hold on GPUs: ``allocations`` are ``(node_id, gpu mask)`` pairs."""

    id: str
    owner: Owner
    start: float
    end: float
    allocations: tuple[tuple[int, int], ...]
    active: bool = False
    #: Leaf groups touched (filled by :meth:`PoolState.book`; read by the guarantee guard).
    groups: tuple[int, ...] = ()

    @property
    def gpus(self) -> int:
        """GPUs held."""
        return sum(mask.bit_count() for _, mask in self.allocations)

    @property
    def node_ids(self) -> tuple[int, ...]:
        """Nodes touched, in allocation order."""
        return tuple(node for node, _ in self.allocations)


class PoolState:
    """Bookings of one pool plus the incrementally maintained free-now counters."""

    def __init__(self, topology: PoolTopology, now: float = 0.0) -> None:
        self.topology = topology
        self.now = now
        nodes = topology.nodes
        self.full_mask: list[int] = [(1 << n.gpus) - 1 for n in nodes]
        self.node_group: list[int] = [n.leaf_group for n in nodes]
        self.node_state: list[NodeState] = [NodeState.AVAILABLE] * len(nodes)
        self.busy_now: list[int] = [0] * len(nodes)
        self.entries: list[list[Entry]] = [[] for _ in nodes]
        self.bookings: dict[str, Booking] = {}
        # node -> number of its bookings that start after ``now``.
        self.future: dict[int, int] = {}
        self.group_free_nodes: list[int] = [len(g.nodes) for g in topology.groups]
        self.group_free_gpus: list[int] = [sum(nodes[i].gpus for i in g.nodes) for g in topology.groups]
        self._largest_group_gpus = max(self.group_free_gpus, default=0)
        # group -> tenant -> number of its non-borrowed bookings touching the group.
        self.group_holders: list[dict[str, int]] = [{} for _ in topology.groups]
        self._events: list[tuple[float, int, int, Booking]] = []
        self._seq = itertools.count()

    # ---------------------------------------------------------------- counters

    def _contribution(self, node: int) -> tuple[int, int]:
        if self.node_state[node] is not NodeState.AVAILABLE:
            return 0, 0
        busy = self.busy_now[node]
        free = self.full_mask[node] & ~busy
        return (1 if busy == 0 else 0), free.bit_count()

    def _set_busy(self, node: int, busy: int) -> None:
        old_nodes, old_gpus = self._contribution(node)
        self.busy_now[node] = busy
        new_nodes, new_gpus = self._contribution(node)
        group = self.node_group[node]
        self.group_free_nodes[group] += new_nodes - old_nodes
        self.group_free_gpus[group] += new_gpus - old_gpus

    def set_node_state(self, node: int, state: NodeState) -> None:
        """Mark a node available/draining/down/off; only available nodes count as free."""
        old_nodes, old_gpus = self._contribution(node)
        self.node_state[node] = NodeState(state)
        new_nodes, new_gpus = self._contribution(node)
        group = self.node_group[node]
        self.group_free_nodes[group] += new_nodes - old_nodes
        self.group_free_gpus[group] += new_gpus - old_gpus

    # ---------------------------------------------------------------- mutations

    def conflicts(
        self, allocations: tuple[tuple[int, int], ...], start: float, end: float, skip: str = ""
    ) -> list[str]:
        """Ids of bookings overlapping ``allocations`` in ``[start, end)`` (``skip`` excluded)."""
        found: list[str] = []
        for node, mask in allocations:
            for s, e, m, bid in self.entries[node]:
                if s < end and e > start and m & mask and bid != skip and bid not in found:
                    found.append(bid)
        return found

    def book(
        self,
        booking_id: str,
        owner: Owner,
        allocations: tuple[tuple[int, int], ...],
        start: float,
        end: float,
    ) -> Booking:
        """Hold GPUs over ``[start, end)``; raises :class:`BookingConflict` on any overlap."""
        if booking_id in self.bookings:
            raise ValueError(f"booking {booking_id!r} already exists")
        if not end > start:
            raise ValueError("a booking must end after it starts")
        if end <= self.now:
            raise ValueError(f"booking {booking_id!r} ends before now ({self.now:g})")
        if not allocations:
            raise ValueError("a booking needs at least one node")
        seen: set[int] = set()
        for node, mask in allocations:
            if not 0 <= node < len(self.full_mask):
                raise ValueError(f"unknown node {node}")
            if node in seen:
                raise ValueError(f"node {node} listed twice")
            seen.add(node)
            if mask <= 0 or mask & ~self.full_mask[node]:
                raise ValueError(f"invalid GPU mask {mask:#x} for node {node}")
        clash = self.conflicts(allocations, start, end)
        if clash:
            raise BookingConflict(f"booking {booking_id!r} overlaps {', '.join(sorted(clash))} in [{start:g}, {end:g})")
        groups = tuple(sorted({self.node_group[node] for node, _ in allocations}))
        booking = Booking(booking_id, owner, start, end, tuple(allocations), groups=groups)
        self.bookings[booking_id] = booking
        for node, mask in allocations:
            self.entries[node].append((start, end, mask, booking_id))
        if not owner.borrowed:
            for group in groups:
                held = self.group_holders[group]
                held[owner.tenant] = held.get(owner.tenant, 0) + 1
        if start <= self.now:
            self._activate(booking)
        else:
            for node, _ in allocations:
                self.future[node] = self.future.get(node, 0) + 1
            heapq.heappush(self._events, (start, _START, next(self._seq), booking))
        heapq.heappush(self._events, (end, _END, next(self._seq), booking))
        return booking

    def _activate(self, booking: Booking) -> None:
        booking.active = True
        for node, mask in booking.allocations:
            self._set_busy(node, self.busy_now[node] | mask)

    def release(self, booking_id: str) -> Booking:
        """Drop a booking now, whether it has started or not; stale events are ignored later."""
        booking = self.bookings.pop(booking_id)
        if not booking.owner.borrowed:
            tenant = booking.owner.tenant
            for group in booking.groups:
                held = self.group_holders[group]
                if held[tenant] == 1:
                    del held[tenant]
                else:
                    held[tenant] -= 1
        for node, mask in booking.allocations:
            self.entries[node] = [e for e in self.entries[node] if e[3] != booking_id]
            if booking.active:
                self._set_busy(node, self.busy_now[node] & ~mask)
            else:
                self._drop_future(node)
        booking.active = False
        return booking

    def extend(self, booking_id: str, new_end: float) -> Booking:
        """Move a booking's end later (or earlier, but not before now or its start)."""
        booking = self.bookings[booking_id]
        if not new_end > max(booking.start, self.now):
            raise ValueError("the new end must be after the booking's start and now")
        if new_end > booking.end:
            clash = self.conflicts(booking.allocations, booking.end, new_end, skip=booking_id)
            if clash:
                raise BookingConflict(f"extending {booking_id!r} to {new_end:g} overlaps {', '.join(sorted(clash))}")
        booking.end = new_end
        for node, _ in booking.allocations:
            self.entries[node] = [
                (s, new_end, m, bid) if bid == booking_id else (s, e, m, bid) for s, e, m, bid in self.entries[node]
            ]
        heapq.heappush(self._events, (new_end, _END, next(self._seq), booking))
        return booking

    def _drop_future(self, node: int) -> None:
        left = self.future[node] - 1
        if left:
            self.future[node] = left
        else:
            del self.future[node]

    def advance(self, now: float) -> list[Booking]:
        """Move time forward, starting and ending bookings; returns the bookings that ended."""
        if now < self.now:
            raise ValueError(f"time cannot go back from {self.now:g} to {now:g}")
        ended: list[Booking] = []
        events = self._events
        while events and events[0][0] <= now:
            time, kind, _, booking = heapq.heappop(events)
            if self.bookings.get(booking.id) is not booking:
                continue  # released or replaced since the event was queued
            if kind == _START:
                if booking.active or booking.start != time:
                    continue
                for node, _mask in booking.allocations:
                    self._drop_future(node)
                self._activate(booking)
            else:
                if booking.end != time:
                    continue  # superseded by extend()
                if not booking.active:
                    # Started and ended within this advance; the start event sorts after it.
                    for node, _mask in booking.allocations:
                        self._drop_future(node)
                    booking.active = True
                    for node, mask in booking.allocations:
                        self._set_busy(node, self.busy_now[node] | mask)
                self.release(booking.id)
                ended.append(booking)
        self.now = now
        return ended

    # ---------------------------------------------------------------- queries

    def free_mask(self, node: int, start: float, end: float, ignore: frozenset[str] = frozenset()) -> int:
        """GPUs of ``node`` free over ``[start, end)`` (``ignore``: bookings to pretend away).

        Node state is not considered here; callers filter on it.
        """
        if start <= self.now and not ignore:
            # Fast path: the busy-now mask already covers every booking active at ``now``.
            mask = self.full_mask[node] & ~self.busy_now[node]
            if node in self.future:
                for s, _e, m, _bid in self.entries[node]:
                    if self.now < s < end:
                        mask &= ~m
            return mask
        mask = self.full_mask[node]
        for s, e, m, bid in self.entries[node]:
            if s < end and e > start and bid not in ignore:
                mask &= ~m
        return mask

    def free_gpus_now(self) -> int:
        """Free GPUs on available nodes at ``now``."""
        return sum(self.group_free_gpus)

    def fragmentation(self) -> float:
        """1 − largest free leaf-group block / the largest block the free capacity could form.

        A block is the GPUs of wholly free nodes in one leaf group; the ideal is
        ``min(total free GPUs, one group's capacity)``. 0 means free capacity is as
        concentrated as it can be; 1 means no whole node is free anywhere although GPUs are.
        """
        total_free = self.free_gpus_now()
        if total_free == 0:
            return 0.0
        largest = 0
        for group in self.topology.groups:
            free_nodes = self.group_free_nodes[group.id]
            if free_nodes:
                per_node = self.topology.nodes[group.nodes[0]].gpus
                largest = max(largest, free_nodes * per_node)
        ideal = min(total_free, self._largest_group_gpus)
        return max(0.0, 1.0 - largest / ideal)

    def next_event_time(self) -> float | None:
        """Earliest queued start/end strictly useful to :meth:`advance` (may be stale)."""
        return self._events[0][0] if self._events else None

    def end_times(self, after: float) -> list[float]:
        """Sorted distinct booking ends after ``after``: the only instants capacity grows."""
        return sorted({b.end for b in self.bookings.values() if b.end > after})

    def check_invariants(self) -> None:
        """Recompute everything from the bookings; raise ``AssertionError`` on any drift.

        Used by property tests: intervals never overlap on a GPU, and the incremental counters
        equal a from-scratch recomputation.
        """
        for node, entries in enumerate(self.entries):
            for i, (s1, e1, m1, b1) in enumerate(entries):
                for s2, e2, m2, b2 in entries[i + 1 :]:
                    if s1 < e2 and s2 < e1 and m1 & m2:
                        raise AssertionError(f"node {node}: {b1} and {b2} overlap")
        busy = [0] * len(self.full_mask)
        future: dict[int, int] = {}
        holders: list[dict[str, int]] = [{} for _ in self.topology.groups]
        for booking in self.bookings.values():
            if not booking.owner.borrowed:
                for group_id in {self.node_group[node] for node in booking.node_ids}:
                    held = holders[group_id]
                    held[booking.owner.tenant] = held.get(booking.owner.tenant, 0) + 1
            assert booking.end > self.now, f"{booking.id} should have ended"
            assert booking.active == (booking.start <= self.now), f"{booking.id} activity"
            for node, mask in booking.allocations:
                assert (booking.start, booking.end, mask, booking.id) in self.entries[node]
                if booking.active:
                    busy[node] |= mask
                else:
                    future[node] = future.get(node, 0) + 1
        entry_count = sum(len(e) for e in self.entries)
        alloc_count = sum(len(b.allocations) for b in self.bookings.values())
        assert entry_count == alloc_count, "stale interval entries"
        assert busy == self.busy_now, "busy-now masks drifted"
        assert future == self.future, "future-booking counts drifted"
        assert holders == self.group_holders, "per-group holders drifted"
        for group in self.topology.groups:
            free_nodes = free_gpus = 0
            for node in group.nodes:
                if self.node_state[node] is NodeState.AVAILABLE:
                    free_nodes += busy[node] == 0
                    free_gpus += (self.full_mask[node] & ~busy[node]).bit_count()
            assert free_nodes == self.group_free_nodes[group.id], f"group {group.id} node count"
            assert free_gpus == self.group_free_gpus[group.id], f"group {group.id} GPU count"


def first_gap(entries: list[tuple[float, float, int, str]], after: float, length: float) -> float:
    """Start of the first interval of ``length`` at or after ``after`` free of ``entries``."""
    t = after
    for s, e, _m, _bid in sorted(entries):
        if e <= t:
            continue
        if s >= t + length:
            break
        t = max(t, e)
    return t
