"""SHARP trees of a pool, loaded from the database for the placement engine's guard.

The trees a switch serves come from the design's catalogue (``sharp_trees`` of its model, kept in
:attr:`~scheduling.services.topology.NamedTopology.sharp_trees`); the trees held are the SHARP
allocations of the pool's reservations that hold nodes (``placement["sharp"]``, the switches of
their aggregation trees, one tree each). A reservation that ends, is cancelled or preempted
leaves the holding states, so its trees are free at the next load; in the engine a hold counts
only while its booking does (:mod:`scheduling.placement.sharp`).
"""

from __future__ import annotations

from scheduling.models import Pool, Reservation
from scheduling.placement.sharp import SharpLedger, SharpTrees
from scheduling.services.topology import NamedTopology


def sharp_guard(pool: Pool, named: NamedTopology) -> SharpTrees | None:
    """The pool's SHARP guard, or ``None`` on a fabric without SHARP-capable switches."""
    if not named.sharp_trees:
        return None
    ledger = SharpLedger(named.sharp_trees)
    keys = named.switch_keys()
    rows = Reservation.objects.filter(
        pool=pool, status__in=(*Reservation.HOLDING, Reservation.Status.ENDING), placement__has_key="sharp"
    )
    for pk, placement in rows.values_list("pk", "placement"):
        ledger.hold(f"r{pk}", (keys[name] for name in placement["sharp"] if name in keys))
    return SharpTrees(ledger, {key: name for name, key in keys.items()})
