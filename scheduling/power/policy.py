"""Which idle nodes to power off and which to power on, for one pool at one instant (plain Python).

:func:`plan` is the whole decision; the console's power task and the replay simulator
(:mod:`scheduling.replay.power`) both call it, with their own notion of "now" and of demand, and
carry out (or, in a dry run, only report) the actions it returns.

The rules, in the order they are applied:

1. **Pinned on**: a pinned node that is off is powered on; a pinned node is never powered off.
2. **Reservations**: an off node with a reservation starting within its boot time plus the
   margin (``start - boot - margin <= now``) is powered on; a node with such a reservation (or a
   live one) is never powered off.
3. **Warm nodes**: the pool keeps on, idle and unreserved, as many nodes as the queued requests
   expected to start within boot time plus margin need, plus the warm buffer
   (``max(buffer_nodes, ceil(buffer_percent % of the pool))``). Nodes already booting count as
   warm. Short of that, off nodes are powered on; above it, nodes idle for longer than
   ``idle_after`` are powered off, never more than the surplus.
4. **Rate limit**: at most ``max_actions_per_minute`` actions in any minute, counting
   ``recent_actions``; power-ons for pinned nodes and reservations first, then power-ons for the
   queue and the buffer, then power-offs.

Which nodes: power-offs take first the nodes of the leaf groups with the fewest busy nodes (the
groups with the least work empty first, so the groups that stay on stay whole), then the longest
idle, then by name; power-ons take first the
off nodes of the leaf groups with the most nodes on (to complete them), then by name. Without
topology every node is its own group and the order is by idle time and name: always deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Literal

#: The window over which the rate limit counts actions.
RATE_WINDOW = timedelta(minutes=1)


class PowerState(StrEnum):
    """A node's power state (the values of ``scheduling.models.Node.power_state``)."""

    ON = "on"
    POWERING_ON = "powering-on"
    OFF = "off"
    POWERING_OFF = "powering-off"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class PowerPolicy:
    """A pool's power policy (operator-editable in the console; parsed from the CLI in the replay)."""

    idle_after: timedelta = timedelta(minutes=30)
    buffer_nodes: int = 0
    buffer_percent: float = 0.0
    margin: timedelta = timedelta(minutes=5)
    #: 0: no limit.
    max_actions_per_minute: int = 0
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.idle_after < timedelta(0) or self.margin < timedelta(0):
            raise ValueError("idle_after and margin cannot be negative")
        if self.buffer_nodes < 0 or not 0 <= self.buffer_percent <= 100:
            raise ValueError("the buffer is 0 or more nodes and 0 to 100 %")
        if self.max_actions_per_minute < 0:
            raise ValueError("max_actions_per_minute cannot be negative (0: no limit)")

    def buffer_for(self, pool_nodes: int) -> int:
        """Warm nodes to keep in a pool of ``pool_nodes``: N nodes or P %, whichever is larger."""
        by_percent = math.ceil(round(self.buffer_percent * pool_nodes / 100, 9))
        return min(pool_nodes, max(self.buffer_nodes, by_percent))


@dataclass(frozen=True, slots=True)
class NodePower:
    """What the planner knows of one node. ``busy``: a job or a live reservation runs on it."""

    name: str
    state: PowerState
    boot: timedelta
    busy: bool = False
    idle_since: datetime | None = None
    pinned_on: bool = False
    #: Leaf group (any hashable label); ``None``: the node is its own group.
    leaf_group: str | int | None = None


@dataclass(frozen=True, slots=True)
class ReservationWindow:
    """A reservation's window on one node."""

    node: str
    start: datetime
    end: datetime


@dataclass(frozen=True, slots=True)
class QueuedDemand:
    """A queued request: when it is expected to start and how many whole nodes it needs."""

    estimated_start: datetime
    nodes: int


@dataclass(frozen=True, slots=True)
class Demands:
    """Everything that will need nodes: reservations (per node) and queued requests."""

    reservations: tuple[ReservationWindow, ...] = ()
    queued: tuple[QueuedDemand, ...] = ()


@dataclass(frozen=True, slots=True)
class PowerAction:
    """One action with its reason in plain language; ``dry_run``: report it, change nothing."""

    node: str
    action: Literal["on", "off"]
    reason: str
    dry_run: bool = False


def _minutes(delta: timedelta) -> str:
    """A duration as people read it: ``45 min``, ``0.5 min``; from two hours on ``3 h``, ``2 h 5 min``."""
    minutes = delta.total_seconds() / 60
    if minutes >= 120:
        hours, rest = divmod(round(minutes), 60)
        return f"{hours} h" if rest == 0 else f"{hours} h {rest} min"
    return f"{round(minutes, 1):g} min"


def _clock(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def plan(
    policy: PowerPolicy,
    nodes: Sequence[NodePower],
    demands: Demands,
    now: datetime,
    recent_actions: Iterable[datetime] = (),
) -> list[PowerAction]:
    """The power actions for ``nodes`` at ``now`` (see the module docstring for the rules)."""
    by_name = {node.name: node for node in nodes}
    if len(by_name) != len(nodes):
        raise ValueError("node names must be unique")
    # A reservation "needs" its node when it is live or starts within that node's boot + margin.
    needed_by: dict[str, ReservationWindow] = {}
    for window in sorted(demands.reservations, key=lambda w: (w.start, w.node)):
        node = by_name.get(window.node)
        if node is None or window.end <= now or window.node in needed_by:
            continue
        if window.start - node.boot - policy.margin <= now:
            needed_by[window.node] = window
    group_on = _group_on_counts(nodes)
    urgent: list[PowerAction] = []
    for node in sorted(nodes, key=lambda n: n.name):
        if node.state is not PowerState.OFF:
            continue
        if node.pinned_on:
            urgent.append(PowerAction(node.name, "on", "pinned on by the operator", policy.dry_run))
        elif node.name in needed_by:
            window = needed_by[node.name]
            urgent.append(
                PowerAction(
                    node.name,
                    "on",
                    f"reservation starts {_clock(window.start)}: boot takes {_minutes(node.boot)} "
                    f"plus a margin of {_minutes(policy.margin)}",
                    policy.dry_run,
                )
            )
    urgent_names = {action.node for action in urgent}
    # Warm: on (or booting) and free for new work.
    warm = [
        n
        for n in nodes
        if not n.busy
        and n.name not in needed_by
        and (n.state in (PowerState.ON, PowerState.POWERING_ON) or n.name in urgent_names)
    ]
    boot = max((n.boot for n in nodes), default=timedelta(0))
    horizon = now + boot + policy.margin
    soon = [q for q in demands.queued if q.estimated_start <= horizon]
    queued_nodes = sum(q.nodes for q in soon)
    pool = [n for n in nodes if n.state is not PowerState.FAILED]
    buffer = policy.buffer_for(len(pool))
    required = queued_nodes + buffer
    wanted = (
        f"{queued_nodes} node(s) wanted by {len(soon)} queued request(s) before {_clock(horizon)} "
        f"plus a warm buffer of {buffer}"
    )
    actions = list(urgent)
    if len(warm) < required:
        off = [n for n in nodes if n.state is PowerState.OFF and n.name not in urgent_names]
        off.sort(key=lambda n: (-group_on.get(_group(n), 0), n.name))
        for node in off[: required - len(warm)]:
            actions.append(PowerAction(node.name, "on", f"{wanted}; only {len(warm)} idle node(s) on", policy.dry_run))
    elif len(warm) > required:
        idle_for = {n.name: now - n.idle_since for n in warm if n.idle_since is not None}
        candidates = [
            n
            for n in warm
            if n.state is PowerState.ON
            and not n.pinned_on
            and n.idle_since is not None
            and idle_for[n.name] >= policy.idle_after
        ]
        group_busy: dict[object, int] = {}
        for n in nodes:
            if n.busy:
                group_busy[_group(n)] = group_busy.get(_group(n), 0) + 1
        candidates.sort(key=lambda n: (group_busy.get(_group(n), 0), -idle_for[n.name], n.name))
        for node in candidates[: len(warm) - required]:
            actions.append(
                PowerAction(
                    node.name,
                    "off",
                    f"idle for {_minutes(idle_for[node.name])} (policy: off after {_minutes(policy.idle_after)}); "
                    f"no reservation needs it before {_clock(now + node.boot + policy.margin)} "
                    f"(boot {_minutes(node.boot)} + margin {_minutes(policy.margin)}); {wanted}, and "
                    f"{len(warm)} idle node(s) are on",
                    policy.dry_run,
                )
            )
    return _rate_limited(policy, actions, now, recent_actions)


def _group(node: NodePower) -> object:
    return ("node", node.name) if node.leaf_group is None else ("group", node.leaf_group)


def _group_on_counts(nodes: Sequence[NodePower]) -> dict[object, int]:
    counts: dict[object, int] = {}
    for node in nodes:
        if node.state in (PowerState.ON, PowerState.POWERING_ON):
            counts[_group(node)] = counts.get(_group(node), 0) + 1
    return counts


def _rate_limited(
    policy: PowerPolicy, actions: list[PowerAction], now: datetime, recent_actions: Iterable[datetime]
) -> list[PowerAction]:
    if policy.max_actions_per_minute <= 0:
        return actions
    used = sum(1 for moment in recent_actions if now - RATE_WINDOW < moment <= now)
    return actions[: max(0, policy.max_actions_per_minute - used)]


__all__ = [
    "Demands",
    "NodePower",
    "PowerAction",
    "PowerPolicy",
    "PowerState",
    "QueuedDemand",
    "RATE_WINDOW",
    "ReservationWindow",
    "plan",
]
