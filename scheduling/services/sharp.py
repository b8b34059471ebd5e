"""SHARP trees of a pool, loaded from the database for the placement engine's guard.

The trees a switch serves come from the design's catalogue (``sharp_trees`` of its model, kept in
:attr:`~scheduling.services.topology.NamedTopology.sharp_trees`); the trees held are the SHARP
allocations of the fabric's reservations that hold nodes (``placement["sharp"]``, the switches of
their aggregation trees, one tree each), whatever their pool: pools of one fabric share its
switches. A reservation of the pool holds while its booking does (a release truncates it); one of
another pool over its window. A reservation that ends, is cancelled or preempted leaves the
holding states, so its trees are free at the next load. SHARP placements lock every pool of the
fabric (:func:`.locks.pool_and_overlapping_lock` with ``fabric_wide``), so two of them in
different pools never take the same last tree.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Sequence

from console.fabric.models import Fabric
from console.fabric.sharp_am import device_configuration, port_groups
from designer.services import revision_graph
from scheduling.models import Pool, Reservation
from scheduling.placement.sharp import SharpLedger, SharpTrees
from scheduling.services.topology import NamedTopology, pool_topology


def sharp_guard(
    pool: Pool, named: NamedTopology, held: Sequence[tuple[int, int, list[str], float, float]] | None = None
) -> SharpTrees | None:
    """The pool's SHARP guard, or ``None`` on a fabric without SHARP-capable switches. ``held``:
    the fabric's holding reservations with SHARP trees (id, pool, switches, start, end in epoch
    seconds) as the caller read them (:func:`.pool_reads.read_pool`); read here otherwise."""
    if not named.sharp_trees:
        return None
    ledger = SharpLedger(named.sharp_trees)
    keys = named.switch_keys()
    if held is None:
        rows = Reservation.objects.filter(
            fabric_id=pool.fabric_id, status__in=Reservation.HOLDING, placement__has_key="sharp"
        )
        held = [
            (pk, pool_id, placement["sharp"], start.timestamp(), end.timestamp())
            for pk, pool_id, placement, start, end in rows.values_list("pk", "pool_id", "placement", "start", "end")
        ]
    for pk, pool_id, switches, start_at, end_at in held:
        window = None if pool_id == pool.pk else (start_at, end_at)
        ledger.hold(f"r{pk}", (keys[name] for name in switches if name in keys), window)
    return SharpTrees(ledger, {key: name for name, key in keys.items()})


def extension_clash(reservation: Reservation, new_end: dt.datetime) -> str | None:
    """Why ``reservation``'s SHARP tree cannot last until ``new_end`` (a switch of it whose trees
    the fabric's other SHARP reservations overlapping the extension hold), or ``None``. Counts
    every holder overlapping the extension, so it may refuse where the holders follow each other."""
    tree = reservation.placement.get("sharp")
    if not tree:
        return None
    named = pool_topology(reservation.pool)
    keys = named.switch_keys()
    others = Reservation.objects.filter(
        fabric_id=reservation.fabric_id,
        status__in=Reservation.HOLDING,
        placement__has_key="sharp",
        start__lt=new_end,
        end__gt=reservation.end,
    ).exclude(pk=reservation.pk)
    held = Counter(name for placement in others.values_list("placement", flat=True) for name in placement["sharp"])
    for name in tree:
        capacity = named.sharp_trees.get(keys.get(name, ""), 0)
        if held[name] + 1 > capacity:
            jobs = "1 job holds its tree" if held[name] == 1 else f"{held[name]} jobs hold its trees"
            return f"SHARP: {name} has no free aggregation tree for the extension; {jobs}"
    return None


def sharp_am_files(fabric: Fabric) -> dict[str, str]:
    """The SHARP AM input of ``fabric`` (:mod:`console.fabric.sharp_am`): ``pgrp_policy_file``
    and ``device_configuration_file`` contents, from its reservations holding a tree."""
    graph = revision_graph(fabric.revision)
    capable = {
        name
        for name, sw in graph.switches.items()
        if (m := graph.catalogue.switches.get(sw.model)) and m.sharp_trees > 0
    }
    rows = Reservation.objects.filter(fabric=fabric, status__in=Reservation.HOLDING, placement__has_key="sharp")
    trees: dict[int, list[int]] = {}
    used: set[str] = set()
    for pk, placement in rows.values_list("pk", "placement"):
        names = [n for n in placement["sharp"] if n in graph.switches]
        trees[pk] = [graph.switches[n].guid for n in names]
        used.update(names)
    idle = [graph.switches[n].guid for n in sorted(capable - used)]
    return {"pgrp_policy_file": port_groups(trees, idle), "device_configuration_file": device_configuration(idle)}
