"""Alarm rules as a pure state machine: sweeps in, open/clear transitions out.

- link down opens at once (critical) and clears when the link is Active again, unless the link's
  node was powered off on purpose (its power state is ``off`` or ``powering-off``: the caller
  passes those links as ``powered_off``); a node whose power action failed is a failure;
- error counters open when a sweep adds at least ``open_at`` errors and clear only after
  ``clear_sweeps`` consecutive sweeps at or below ``clear_at`` (hysteresis: a link hovering
  around the threshold does not flap the alarm);
- a link that dropped :attr:`AlarmRules.flap_drops` times within :attr:`AlarmRules.flap_window_s`
  is flapping: one alarm (it stays open between the drops, each drop adds to its history) in
  place of a link-down event per drop; it clears once the link has stayed up for a whole window;
- alarms name a link by both ends and its cable (``describe``);
- routing: the engine OpenSM actually used differs from the configured one (ftree → minhop);
- SM state: the master SM is no longer MASTER (or another SM took over).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field

from console.telemetry.core import LinkStatus

#: drops kept per flapping link (its alarm's history)
HISTORY = 50


@dataclass(frozen=True)
class Transition:
    """``open`` or ``clear`` of one condition."""

    action: str  # open | clear | update (an open condition's message and detail)
    kind: str
    subject: str
    severity: str = "warning"
    message: str = ""
    detail: dict = field(default_factory=dict)


@dataclass
class AlarmRules:
    open_at: int = 10
    clear_at: int = 0
    clear_sweeps: int = 5
    flap_drops: int = 3  # drops of one link within flap_window_s that make it flapping
    flap_window_s: float = 600.0


@dataclass
class AlarmEngine:
    """Remembers which conditions are open; feed it every sweep."""

    rules: AlarmRules = field(default_factory=AlarmRules)
    down: set[str] = field(default_factory=set)
    erroring: dict[str, int] = field(default_factory=dict)  # link → quiet sweeps so far
    routing_fallback: bool = False
    sm: str | None = None
    drops: dict[str, deque[float]] = field(default_factory=dict)  # link → its drops' times (window)
    flapping: set[str] = field(default_factory=set)
    was_up: dict[str, bool] = field(default_factory=dict)

    def seed(self, open_conditions: Mapping[str, set[str]]) -> None:
        """Start from the unresolved events already stored (a restarted collector)."""
        self.down = set(open_conditions.get("link_down", set()))
        self.erroring = {s: 0 for s in open_conditions.get("link_errors", set())}
        self.routing_fallback = bool(open_conditions.get("routing_fallback"))
        self.flapping = set(open_conditions.get("link_flapping", set()))

    def links(
        self,
        statuses: Mapping[str, LinkStatus],
        powered_off: Set[str] = frozenset(),
        *,
        now: float = 0.0,
        describe: Callable[[str], str] = str,
    ) -> list[Transition]:
        """Transitions of this sweep (taken at ``now``, seconds); ``powered_off``: links whose node
        is off (or going off) by an operator's or the policy's action, down as intended (no
        alarm); ``describe`` names a link in messages (both ends and the cable)."""
        out: list[Transition] = []
        for lid, st in statuses.items():
            dropped = not st.up and self.was_up.get(lid, True) and lid not in powered_off
            self.was_up[lid] = st.up
            if dropped:
                out += self._drop(lid, now, describe)
            if not st.up and lid not in self.down and lid not in powered_off and lid not in self.flapping:
                self.down.add(lid)
                out.append(Transition("open", "link_down", lid, "critical", f"link {describe(lid)} is down"))
            elif st.up and lid in self.down:
                self.down.discard(lid)
                out.append(Transition("clear", "link_down", lid, message=f"link {describe(lid)} is up"))
            # (a flapping alarm seeded from a restarted collector's store counts its window from now)
            last = self.drops.setdefault(lid, deque([now], maxlen=HISTORY))[-1] if lid in self.flapping else now
            if st.up and lid in self.flapping and now - last >= self.rules.flap_window_s:
                self.flapping.discard(lid)
                self.drops.pop(lid, None)
                window = f"{self.rules.flap_window_s / 60:g} min"
                out.append(
                    Transition("clear", "link_flapping", lid, message=f"link {describe(lid)} stable for {window}")
                )
            total = sum(st.errors.values())
            if lid not in self.erroring:
                if total >= self.rules.open_at:
                    self.erroring[lid] = 0
                    out.append(
                        Transition(
                            "open",
                            "link_errors",
                            lid,
                            "warning",
                            f"link {lid}: {total} errors in one sweep",
                            {"errors": {k: v for k, v in st.errors.items() if v}},
                        )
                    )
            elif total <= self.rules.clear_at:
                self.erroring[lid] += 1
                if self.erroring[lid] >= self.rules.clear_sweeps:
                    del self.erroring[lid]
                    out.append(Transition("clear", "link_errors", lid, message=f"link {lid}: errors stopped"))
            else:
                self.erroring[lid] = 0
        return out

    def _drop(self, lid: str, now: float, describe: Callable[[str], str]) -> list[Transition]:
        """A drop of ``lid`` at ``now``: the flapping alarm opened, or its history grown."""
        window = self.rules.flap_window_s
        times = self.drops.setdefault(lid, deque(maxlen=HISTORY))
        times.append(now)
        while times and now - times[0] > window and lid not in self.flapping:
            times.popleft()
        if len(times) < self.rules.flap_drops and lid not in self.flapping:
            return []
        recent = [t for t in times if now - t <= window]
        detail = {
            "drops": len(times),
            "drops_in_window": len(recent),
            "window_s": window,
            "per_hour": round(len(recent) * 3600 / window, 1),
            "history": [round(t, 3) for t in times],  # the drops' times (epoch seconds), the last HISTORY
        }
        message = f"link {describe(lid)} is flapping: {len(recent)} drops in {window / 60:g} min"
        if lid in self.flapping:
            return [Transition("update", "link_flapping", lid, "critical", message, detail)]
        self.flapping.add(lid)
        out = [Transition("open", "link_flapping", lid, "critical", message, detail)]
        if lid in self.down:  # the flapping alarm stands for its drops from now on
            self.down.discard(lid)
            out.append(Transition("clear", "link_down", lid, message=f"link {describe(lid)}: now a flapping alarm"))
        return out

    def routing(self, configured: str, in_use: str | None, fallback: bool) -> list[Transition]:
        if fallback and not self.routing_fallback:
            self.routing_fallback = True
            return [
                Transition(
                    "open",
                    "routing_fallback",
                    "routing",
                    "critical",
                    f"OpenSM fell back from {configured} to {in_use}",
                    {"configured": configured, "in_use": in_use},
                )
            ]
        if not fallback and in_use and self.routing_fallback:
            self.routing_fallback = False
            return [Transition("clear", "routing_fallback", "routing", message=f"OpenSM routes with {in_use} again")]
        return []

    def sm_state(self, state: str | None) -> list[Transition]:
        """``state`` of the master SM as sminfo reports it (None: no answer)."""
        previous, self.sm = self.sm, state
        if previous is None or state == previous:
            return []
        if state != "MASTER":
            return [Transition("open", "sm_state", "sm", "critical", f"subnet manager state {previous} → {state}")]
        return [Transition("clear", "sm_state", "sm", message="subnet manager is MASTER again")]
