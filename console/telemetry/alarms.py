"""Alarm rules as a pure state machine: sweeps in, open/clear transitions out.

- link down opens at once (critical) and clears when the link is Active again, unless the link's
  node was powered off on purpose (its power state is ``off`` or ``powering-off``: the caller
  passes those links as ``powered_off``); a node whose power action failed is a failure;
- error counters open when a sweep adds at least ``open_at`` errors and clear only after
  ``clear_sweeps`` consecutive sweeps at or below ``clear_at`` (hysteresis: a link hovering
  around the threshold does not flap the alarm);
- routing: the engine OpenSM actually used differs from the configured one (ftree → minhop);
- SM state: the master SM is no longer MASTER (or another SM took over).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from console.telemetry.core import LinkStatus


@dataclass(frozen=True)
class Transition:
    """``open`` or ``clear`` of one condition."""

    action: str  # open | clear
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


@dataclass
class AlarmEngine:
    """Remembers which conditions are open; feed it every sweep."""

    rules: AlarmRules = field(default_factory=AlarmRules)
    down: set[str] = field(default_factory=set)
    erroring: dict[str, int] = field(default_factory=dict)  # link → quiet sweeps so far
    routing_fallback: bool = False
    sm: str | None = None

    def seed(self, open_conditions: Mapping[str, set[str]]) -> None:
        """Start from the unresolved events already stored (a restarted collector)."""
        self.down = set(open_conditions.get("link_down", set()))
        self.erroring = {s: 0 for s in open_conditions.get("link_errors", set())}
        self.routing_fallback = bool(open_conditions.get("routing_fallback"))

    def links(self, statuses: Mapping[str, LinkStatus], powered_off: Set[str] = frozenset()) -> list[Transition]:
        """Transitions of this sweep; ``powered_off``: links whose node is off (or going off) by an
        operator's or the policy's action, down as intended (no alarm)."""
        out: list[Transition] = []
        for lid, st in statuses.items():
            if not st.up and lid not in self.down and lid not in powered_off:
                self.down.add(lid)
                out.append(Transition("open", "link_down", lid, "critical", f"link {lid} is down"))
            elif st.up and lid in self.down:
                self.down.discard(lid)
                out.append(Transition("clear", "link_down", lid, message=f"link {lid} is up"))
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
