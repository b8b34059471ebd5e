"""Placement that knows power: which nodes can be on before a window starts, and what to say.

Plain Python (no Django). The console reads the nodes that are not on (their power state and when
it last changed) and builds a :class:`PowerFit` for one decision's start; it gives

- the request filter :class:`~.constraints.PoweredInTime`: failed nodes never; off (or
  powering-off) nodes only when their type's boot time plus :data:`BOOT_MARGIN_S` ends before the
  start; powering-on nodes when what is left of their boot fits;
- the engine preference :class:`~.constraints.PoweredOn`: nodes that are on are tried first (an
  all-on gang is taken when it spans no more leaf groups than the unconstrained choice) and
  taken first inside a leaf group;
- the sentences: what a placement on booting nodes waits for, and which nodes a rejection left
  out, with the start the request could have once they are booted.

When every node is on there is no :class:`PowerFit` and the engine runs exactly as before.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .constraints import DEFAULT_PREFERENCES, PoweredInTime, PoweredOn
from .topology import PoolTopology
from .types import NodeFilter, format_time

ON = "on"
POWERING_ON = "powering-on"
OFF = "off"
POWERING_OFF = "powering-off"
FAILED = "failed"
#: Slack on top of a node type's boot time before a booted node counts as ready (BMC latency,
#: the subnet manager bringing its ports to active, the P_Key push).
BOOT_MARGIN_S = 120.0
#: Node names a rejection's details list at most (the counts are complete).
MAX_NAMED = 50


@dataclass(frozen=True, slots=True)
class NodePower:
    """A node that is not on: its power state and when it last changed (epoch seconds)."""

    state: str
    since: float | None = None


def ready_at(boot_s: float, power: NodePower, now: float, margin: float = BOOT_MARGIN_S) -> float:
    """The earliest time a node can be on with its ports active (``inf``: failed, never)."""
    if power.state == ON:
        return now
    if power.state == FAILED:
        return math.inf
    if power.state == POWERING_ON:
        began = power.since if power.since is not None else now
        return max(now, min(now, began) + boot_s) + margin
    # Off, or on its way off (it finishes, then boots): a full boot from now.
    return now + boot_s + margin


def _minutes(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds / 60))} min"


def _names(topology: PoolTopology, nodes: Iterable[int], most: int = 3) -> str:
    names = [topology.nodes[n].name for n in sorted(nodes)]
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


@dataclass(frozen=True)
class PowerFit:
    """Power of one pool's nodes that are not on, judged for a window starting at ``start``."""

    topology: PoolTopology
    now: float
    start: float
    power: Mapping[int, NodePower]
    margin: float = BOOT_MARGIN_S
    #: Engine index -> the time the node can be ready (nodes not on only).
    ready: dict[int, float] = field(init=False)
    #: Nodes that cannot be ready by ``start`` (failed ones included).
    excluded: frozenset[int] = field(init=False)

    def __post_init__(self) -> None:
        nodes = self.topology.nodes
        ready = {n: ready_at(nodes[n].boot_s, p, self.now, self.margin) for n, p in self.power.items()}
        object.__setattr__(self, "ready", ready)
        object.__setattr__(self, "excluded", frozenset(n for n, t in ready.items() if t > self.start))

    def filters(self) -> tuple[NodeFilter, ...]:
        """The request's power filter (none when every node not on can still boot in time)."""
        return (PoweredInTime(self.excluded),) if self.excluded else ()

    def preferences(self) -> tuple[NodeFilter, ...]:
        """The engine's preferences: the defaults, then nodes that are on."""
        return (*DEFAULT_PREFERENCES, PoweredOn(frozenset(self.ready)))

    def start_label(self) -> str:
        """``now`` or ``14:00 UTC``."""
        return "now" if self.start <= self.now else f"{format_time(self.start)} UTC"

    def placement_note(self, node_ids: Iterable[int]) -> dict[str, Any] | None:
        """What a placement on ``node_ids`` waits for: ``None`` when all of them are on."""
        nodes = list(node_ids)
        waiting = sorted(n for n in nodes if n in self.ready)
        if not waiting:
            return None
        ready_by = max(self.ready[n] for n in waiting)
        booting = [n for n in waiting if self.power[n].state == POWERING_ON]
        verb = "are" if len(waiting) > 1 else "is"
        state = "booting" if len(booting) == len(waiting) else "powered off"
        head = f"{len(waiting)} of {len(nodes)} nodes {verb} {state}; "
        head += "they boot" if len(waiting) > 1 else "it boots"
        head += f" in {_minutes(ready_by - self.now)}"
        if ready_by <= self.start:
            message = f"{head}, before the start at {self.start_label()}"
        else:
            message = f"{head}: expected ready {format_time(ready_by)} UTC"
        return {
            "message": message,
            "nodes": [self.topology.nodes[n].name for n in waiting],
            "ready_by": ready_by,
            "before_start": ready_by <= self.start,
        }

    def rejection_note(self) -> tuple[str, dict[str, Any]]:
        """The clause naming the nodes the power filter left out, and its figures."""
        failed = sorted(n for n in self.excluded if self.power[n].state == FAILED)
        late = sorted(n for n in self.excluded if n not in failed)
        parts = []
        if late:
            verb = "are" if len(late) > 1 else "is"
            who = f"node {_names(self.topology, late)}" if len(late) == 1 else f"{len(late)} nodes"
            boot = max(self.ready[n] for n in late) - self.now
            parts.append(
                f"{who} {verb} off and cannot boot before {self.start_label()} "
                f"(ready in {_minutes(boot)}): excluded"
                + ("" if len(late) == 1 else f" ({_names(self.topology, late)})")
            )
        if failed:
            parts.append(f"{len(failed)} failed node{'s' if len(failed) > 1 else ''}: excluded")
        details = {
            "power_excluded_nodes": [self.topology.nodes[n].name for n in late[:MAX_NAMED]],
            "power_excluded_count": len(late),
            "power_failed_nodes": [self.topology.nodes[n].name for n in failed[:MAX_NAMED]],
            "power_failed_count": len(failed),
        }
        return "; ".join(parts), details

    def booted_start(self) -> float | None:
        """When every excluded node that is not failed can be ready (``None``: none is)."""
        times = [self.ready[n] for n in self.excluded if not math.isinf(self.ready[n])]
        return max(times) if times else None
