"""Free capacity of a pool over time: the availability timeline tenants plan with."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone

from console.tenancy.errors import Invalid
from console.tenancy.horizon import check_within_horizon
from scheduling.models import Pool
from scheduling.placement import NodeState
from scheduling.services.reservations import snapshot

MAX_SLOTS = 500


def availability(
    pool: Pool,
    *,
    start: dt.datetime | None = None,
    hours: float = 24,
    step: dt.timedelta = dt.timedelta(hours=1),
) -> dict[str, Any]:
    """Per slot of ``step`` from ``start``: free GPUs, wholly free nodes and the largest wholly
    free leaf group (a GPU counts as free only if it is free for the whole slot)."""
    now = timezone.now()
    check_within_horizon("start", start, now=now)
    start = max(start or now, now)
    if hours <= 0 or step <= dt.timedelta(0):
        raise Invalid("hours and step must be positive", fields={"hours": ["must be positive"]})
    slots = int(dt.timedelta(hours=hours) / step)
    if not 1 <= slots <= MAX_SLOTS:
        raise Invalid(f"1 to {MAX_SLOTS} slots (hours / step)", fields={"step_minutes": ["range"]})
    snap = snapshot(pool, now)
    state = snap.engine.state
    topology = snap.named.topology
    available = [i for i, s in enumerate(state.node_state) if s is NodeState.AVAILABLE]
    timeline = []
    for k in range(slots):
        a = start + step * k
        b = a + step
        free_gpus = free_nodes = 0
        per_group = [0] * len(topology.groups)
        for node in available:
            mask = state.free_mask(node, a.timestamp(), b.timestamp())
            free_gpus += mask.bit_count()
            if mask == state.full_mask[node]:
                free_nodes += 1
                per_group[state.node_group[node]] += 1
        timeline.append(
            {
                "start": a,
                "end": b,
                "free_gpus": free_gpus,
                "free_nodes": free_nodes,
                "largest_free_leaf_group_nodes": max(per_group, default=0),
            }
        )
    return {
        "pool": pool.pk,
        "total_gpus": topology.total_gpus,
        "total_nodes": len(topology.nodes),
        "leaf_groups": len(topology.groups),
        "slots": timeline,
    }
