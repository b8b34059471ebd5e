"""Shared builders for scheduling tests (plain functions, no hidden random state)."""

from __future__ import annotations

from scheduling.placement import Owner, PlacementEngine

TENANT = Owner(tenant="acme")


def occupy(
    engine: PlacementEngine,
    nodes: list[int] | range,
    *,
    start: float | None = None,
    end: float = 1e12,
    booking_id: str = "busy",
    owner: Owner = TENANT,
) -> None:
    """Book whole ``nodes`` as one booking over ``[start, end)`` (start defaults to now)."""
    state = engine.state
    allocations = tuple((n, state.full_mask[n]) for n in nodes)
    state.book(booking_id, owner, allocations, engine.now if start is None else start, end)


def overlapping_pairs(engine: PlacementEngine) -> list[tuple[str, str]]:
    """Bookings sharing a GPU in overlapping windows, recomputed from the bookings alone."""
    clashes = []
    bookings = list(engine.state.bookings.values())
    for i, a in enumerate(bookings):
        for b in bookings[i + 1 :]:
            if a.start < b.end and b.start < a.end:
                masks_b = dict(b.allocations)
                if any(masks_b.get(node, 0) & mask for node, mask in a.allocations):
                    clashes.append((a.id, b.id))
    return clashes
