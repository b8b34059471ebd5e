"""Power management in the replay: the pool's nodes go off and boot again under a power policy.

The simulator consults one :class:`PowerModel` around each scheduling pass; the model asks
:func:`scheduling.power.policy.plan` what to do and does it on the engine's own state, so
placement needs no notion of power:

* a node powered off is held by an open-ended **power booking** (``[now, FAR)``, owner
  ``power``): the engine sees it as busy, so nothing is placed on it; a node with any future
  booking (the head's EASY reservation) cannot be booked off, so it stays on;
* powering a node on moves that booking's end to ``now + boot``: the node comes free when it has
  booted, and a job that needs it (placed there by the pass, or reserved there as the head) starts
  then. That wait for the boot is the cost of the policy, measured as the change in wait against
  the same replay without it;
* demand is the queue after arrivals: whole-node jobs need their nodes, smaller jobs the GPUs
  that partly used nodes cannot hold, in whole nodes. All of it is expected to start now.

Energy is accounted with :class:`scheduling.power.energy.Totals` over the replay's busy period
(first arrival to last completion) for a pool of one node type: booting at the busy draw, a
power-off instantaneous (a shutdown takes a minute or two at about the idle draw: omitted).
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from designer.catalogue import NodeType
from scheduling.placement import BookingConflict, Owner, PlacementEngine
from scheduling.power.energy import NodeWatts, Totals
from scheduling.power.policy import (
    RATE_WINDOW,
    Demands,
    NodePower,
    PowerPolicy,
    PowerState,
    QueuedDemand,
    ReservationWindow,
    plan,
)

#: End of a power booking while the node stays off (far beyond any trace).
FAR = 1e15
POWER_OWNER = Owner(tenant="power")
#: Trace seconds are read as seconds after this instant by the planner (which speaks datetimes).
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
#: Keys the summary gains under a power policy, in order.
POWER_KEYS = (
    "energy_kwh",
    "energy_kwh_always_on",
    "energy_saved_fraction",
    "power_on_actions",
    "power_off_actions",
    "node_hours_off",
)
#: Keys comparing a power replay with the same replay without the policy.
WAIT_DELTA_KEYS = ("wait_delta_avg_s", "wait_delta_p95_s", "wait_delta_p95_fraction")

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(s|m|min|h)?$")


@dataclass(frozen=True, slots=True)
class PowerSettings:
    """A power policy for the replay with the pool's node type figures."""

    policy: PowerPolicy
    watts: NodeWatts
    boot_s: float
    node_type: str = ""


def parse_duration(text: str) -> timedelta:
    """``30m``, ``1h``, ``90s`` or a bare number of minutes."""
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"not a duration: {text!r} (e.g. 30m, 1h, 90s)")
    value, unit = float(match.group(1)), match.group(2) or "m"
    return timedelta(seconds=value * {"s": 1, "m": 60, "min": 60, "h": 3600}[unit])


def parse_power_policy(text: str, node_type: NodeType) -> PowerSettings:
    """Settings from ``idle=T,buffer=N|P%[,margin=M][,rate=N]``, e.g. ``idle=30m,buffer=2%``."""
    fields: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in ("idle", "buffer", "margin", "rate"):
            raise ValueError(f"unknown power policy field {part!r} (idle=, buffer=, margin=, rate=)")
        fields[key] = value.strip()
    if "idle" not in fields:
        raise ValueError("the power policy needs idle=T (e.g. idle=30m)")
    buffer = fields.get("buffer", "0")
    try:
        nodes, percent = (0, float(buffer[:-1])) if buffer.endswith("%") else (int(buffer), 0.0)
        rate = int(fields.get("rate", "0"))
    except ValueError:
        raise ValueError(f"buffer is N nodes or P%, rate an integer: got {text!r}") from None
    policy = PowerPolicy(
        idle_after=parse_duration(fields["idle"]),
        buffer_nodes=nodes,
        buffer_percent=percent,
        margin=parse_duration(fields.get("margin", "5m")),
        max_actions_per_minute=rate,
    )
    return PowerSettings(policy, NodeWatts.of(node_type), float(node_type.boot_s), node_type.name)


def _at(seconds: float) -> datetime:
    return EPOCH + timedelta(seconds=seconds)


class PowerModel:
    """The pool's power states during one replay, driven by :func:`plan`."""

    def __init__(self, settings: PowerSettings, engine: PlacementEngine) -> None:
        self.settings = settings
        self.policy = settings.policy
        self.state = engine.state
        topology = engine.topology
        self.start = engine.now
        count = len(topology.nodes)
        self.names = [n.name for n in topology.nodes]
        self.groups = [n.leaf_group for n in topology.nodes]
        self.gpus_per_node = max((n.gpus for n in topology.nodes), default=1)
        self.power = [PowerState.ON] * count
        self.idle_since: list[float | None] = [self.start] * count
        self.off_since = [0.0] * count
        self.boot_done = [0.0] * count
        self.off_booking: dict[int, str] = {}
        self.recent: deque[float] = deque()
        self.off_s = 0.0
        self.booting_s = 0.0
        self.on_actions = 0
        self.off_actions = 0
        self._seq = 0
        self._idle_after = self.policy.idle_after.total_seconds()
        self._buffer = self.policy.buffer_for(count)

    # ---------------------------------------------------------------- events

    def next_event(self, now: float) -> float:
        """When the model may next act on its own: an idle node reaching ``idle_after``, or the
        rate window freeing up."""
        soonest = math.inf
        for node, since in enumerate(self.idle_since):
            if since is not None and self.power[node] is PowerState.ON:
                due = since + self._idle_after
                if now < due < soonest:
                    soonest = due
        if self.policy.max_actions_per_minute and len(self.recent) >= self.policy.max_actions_per_minute:
            freed = self.recent[0] + RATE_WINDOW.total_seconds()
            if freed > now:
                soonest = min(soonest, freed)
        return soonest

    def tick(self, now: float, queued_gpus: Iterable[int]) -> None:
        """Update idle times and boots at ``now``; plan and carry out power actions."""
        state = self.state
        busy_now = state.busy_now
        for node, power in enumerate(self.power):
            if power is PowerState.POWERING_ON and self.boot_done[node] <= now:
                self.power[node] = power = PowerState.ON
                self.idle_since[node] = self.boot_done[node]
            if power is PowerState.ON:
                if busy_now[node]:
                    self.idle_since[node] = None
                elif self.idle_since[node] is None:
                    self.idle_since[node] = now
        window = RATE_WINDOW.total_seconds()
        while self.recent and self.recent[0] <= now - window:
            self.recent.popleft()
        demand = self._demand_nodes(queued_gpus)
        if not demand and not self._may_act(now):
            return
        actions = plan(self.policy, self._nodes(now), self._demands(now, demand), _at(now), map(_at, self.recent))
        if self.policy.dry_run:
            return  # report only: the replay then equals the one without a policy
        index = {name: i for i, name in enumerate(self.names)}
        for action in actions:
            node = index[action.node]
            if action.action == "off":
                self._power_off(node, now)
            else:
                self._power_on(node, now)

    def _may_act(self, now: float) -> bool:
        # Cheap pre-check so a quiet pool does not build the planner's inputs at every event: the
        # planner can only act (without queued demand) below the buffer, or above it with a node
        # idle past T. Its warm count lies between these two (reserved nodes left out or not).
        warm_all = warm_unreserved = 0
        due = False
        future = self.state.future
        for node, power in enumerate(self.power):
            if power is PowerState.POWERING_ON or (power is PowerState.ON and not self.state.busy_now[node]):
                warm_all += 1
                warm_unreserved += node not in future
                since = self.idle_since[node]
                due = due or (since is not None and now - since >= self._idle_after)
        return warm_unreserved < self._buffer or (due and warm_all > self._buffer)

    def _demand_nodes(self, queued_gpus: Iterable[int]) -> int:
        per_node = self.gpus_per_node
        whole = small = 0
        for gpus in queued_gpus:
            if gpus >= per_node:
                whole += -(-gpus // per_node)
            else:
                small += gpus
        if small:
            partial = 0
            for node, power in enumerate(self.power):
                busy = self.state.busy_now[node]
                if power is PowerState.ON and busy:
                    partial += (self.state.full_mask[node] & ~busy).bit_count()
            small = max(0, small - partial)
        return whole + -(-small // per_node)

    def _nodes(self, now: float) -> list[NodePower]:
        boot = timedelta(seconds=self.settings.boot_s)
        out = []
        for node, power in enumerate(self.power):
            since = self.idle_since[node]
            busy = power is PowerState.ON and bool(self.state.busy_now[node])
            out.append(
                NodePower(
                    name=self.names[node],
                    state=power,
                    boot=boot,
                    busy=busy,
                    idle_since=_at(since) if since is not None and power is PowerState.ON else None,
                    leaf_group=self.groups[node],
                )
            )
        return out

    def _demands(self, now: float, queued_nodes: int) -> Demands:
        windows = []
        for node in self.state.future:
            for start, end, _mask, booking in self.state.entries[node]:
                if start > now and not booking.startswith("power-"):
                    windows.append(ReservationWindow(self.names[node], _at(start), _at(end)))
        queued = (QueuedDemand(_at(now), queued_nodes),) if queued_nodes else ()
        return Demands(reservations=tuple(windows), queued=queued)

    def _power_off(self, node: int, now: float) -> None:
        self._seq += 1
        booking = f"power-{node}-{self._seq}"
        try:
            self.state.book(booking, POWER_OWNER, ((node, self.state.full_mask[node]),), now, FAR)
        except BookingConflict:
            return  # a future booking (the head's reservation) needs it: it stays on
        self.off_booking[node] = booking
        self.power[node] = PowerState.OFF
        self.idle_since[node] = None
        self.off_since[node] = now
        self.off_actions += 1
        self.recent.append(now)

    def _power_on(self, node: int, now: float) -> None:
        booking = self.off_booking.pop(node)
        boot = self.settings.boot_s
        if boot > 0:
            self.state.extend(booking, now + boot)
        else:
            self.state.release(booking)
        self.off_s += now - self.off_since[node]
        self.booting_s += boot
        self.boot_done[node] = now + boot
        self.power[node] = PowerState.POWERING_ON if boot > 0 else PowerState.ON
        self.idle_since[node] = None if boot > 0 else now
        self.on_actions += 1
        self.recent.append(now)

    # ---------------------------------------------------------------- results

    def totals(self, end: float, busy_gpu_s: float) -> Totals:
        """The pool's :class:`Totals` over ``[start, end)``."""
        off_s, booting_s = self.off_s, self.booting_s
        for node, power in enumerate(self.power):
            if power is PowerState.OFF:
                off_s += max(0.0, end - self.off_since[node])
            elif power is PowerState.POWERING_ON and self.boot_done[node] > end:
                booting_s -= self.boot_done[node] - end
        span = max(0.0, end - self.start) * len(self.power)
        return Totals(
            on_s=span - off_s - booting_s,
            off_s=off_s,
            booting_s=booting_s,
            busy_load_s=busy_gpu_s / self.gpus_per_node,
        )

    def summary(self, end: float, busy_gpu_s: float) -> dict[str, float | int]:
        """The :data:`POWER_KEYS` figures."""
        totals = self.totals(end, busy_gpu_s)
        kwh = totals.kwh(self.settings.watts)
        always_on = totals.kwh_always_on(self.settings.watts)
        return {
            "energy_kwh": kwh,
            "energy_kwh_always_on": always_on,
            "energy_saved_fraction": 1 - kwh / always_on if always_on > 0 else 0.0,
            "power_on_actions": self.on_actions,
            "power_off_actions": self.off_actions,
            "node_hours_off": totals.off_s / 3600,
        }


def wait_deltas(baseline: Mapping[str, Any], powered: Mapping[str, Any]) -> dict[str, float | None]:
    """The change in wait a power policy causes: ``powered`` minus ``baseline`` (same trace);
    the p95 change as a fraction of the baseline's p95 (``None`` when that is 0)."""
    base_p95 = float(baseline["p95_wait_s"])
    p95 = float(powered["p95_wait_s"]) - base_p95
    return {
        "wait_delta_avg_s": float(powered["avg_wait_s"]) - float(baseline["avg_wait_s"]),
        "wait_delta_p95_s": p95,
        "wait_delta_p95_fraction": p95 / base_p95 if base_p95 > 0 else None,
    }
