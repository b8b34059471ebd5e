"""The per-fabric health policy: when a port's error counters say it must be isolated, and when
it may come back (issue 35; UFM's PDR and link-resiliency plugins do the same without knowing
whose traffic crosses the port).

Plain typed Python, no Django: the collector feeds an :class:`Evaluator` each sweep's error
totals per switch port, the preview and the tests :func:`replay` recorded readings through one.

- A :class:`Rule` is a counter, a threshold and a window: a port crosses it when the counter rose
  by more than ``threshold`` over the last ``window_s`` seconds (a counter that went back —
  cleared, or a reset switch — counts from zero). A gauge rule (temperature, BER where a fabric
  reports them) crosses when the value read is above the threshold.
- A crossing port is isolated (``isolate``) unless it is on the allow-list or the fabric already
  has as many ports isolated as the cap allows (``max(cap_min, cap_fraction × ports)``): then
  the decision is ``capped`` and nothing changes. Each decision keeps the readings that caused it.
- An isolated port that crossed nothing for ``clean_s`` seconds comes back (``restore``).
- ``dry_run``: the same decisions are made and recorded; whoever applies them does nothing.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Port = tuple[str, int]  # (switch, port)

#: The counters a policy may watch (PortCounters names; gauges where fabrics report them).
COUNTERS = (
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortXmitDiscards",
)
GAUGES = ("Temperature", "BER")


@dataclass(frozen=True)
class Rule:
    counter: str
    threshold: float
    window_s: float = 3600.0

    @property
    def gauge(self) -> bool:
        return self.counter in GAUGES


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...]
    dry_run: bool = True
    cap_min: int = 10
    cap_fraction: float = 0.005
    allow: frozenset[Port] = frozenset()
    clean_s: float = 3600.0

    def cap(self, ports: int) -> int:
        """How many ports may be isolated at once on a fabric of ``ports`` switch ports."""
        return max(self.cap_min, math.floor(self.cap_fraction * ports))

    def as_json(self) -> dict[str, Any]:
        return {
            "rules": [{"counter": r.counter, "threshold": r.threshold, "window_s": r.window_s} for r in self.rules],
            "dry_run": self.dry_run,
            "cap_min": self.cap_min,
            "cap_fraction": self.cap_fraction,
            "allow": [f"{sw}/{p}" for sw, p in sorted(self.allow)],
            "clean_s": self.clean_s,
        }


#: The default: the error counters' suggested limits (rdma-core's error_thresholds) per hour,
#: link downs a little stricter; dry run until an operator turns it on.
DEFAULT_POLICY = Policy(
    rules=(
        Rule("SymbolErrorCounter", 10, 3600.0),
        Rule("LinkErrorRecoveryCounter", 10, 3600.0),
        Rule("LinkDownedCounter", 5, 3600.0),
        Rule("PortRcvErrors", 10, 3600.0),
    ),
)


class PolicyError(ValueError):
    """A policy document that cannot be used (the message says which field and why)."""


def parse_policy(doc: Mapping[str, Any]) -> Policy:
    """A policy from its JSON (:meth:`Policy.as_json`'s shape); :class:`PolicyError` on bad input."""
    if not isinstance(doc, Mapping):
        raise PolicyError("the policy is a JSON object")
    rules = []
    for i, raw in enumerate(doc.get("rules") or []):
        if not isinstance(raw, Mapping):
            raise PolicyError(f"rules[{i}] is an object with counter, threshold, window_s")
        counter = raw.get("counter")
        if counter not in COUNTERS + GAUGES:
            raise PolicyError(f"rules[{i}].counter {counter!r} is not one of {', '.join(COUNTERS + GAUGES)}")
        threshold = _number(raw.get("threshold"), f"rules[{i}].threshold", low=0)
        window = _number(raw.get("window_s", 3600), f"rules[{i}].window_s", low=1, high=7 * 86400)
        rules.append(Rule(str(counter), threshold, window))
    if len({r.counter for r in rules}) != len(rules):
        raise PolicyError("one rule per counter")
    allow = set()
    for item in doc.get("allow") or []:
        switch, sep, port = str(item).rpartition("/")
        if not sep or not switch or not (port.isascii() and port.isdigit()):
            raise PolicyError(f"allow entry {item!r} is not switch/port")
        allow.add((switch, int(port)))
    dry_run = doc.get("dry_run", True)
    if not isinstance(dry_run, bool):
        raise PolicyError("dry_run is true or false")
    return Policy(
        rules=tuple(rules),
        dry_run=dry_run,
        cap_min=int(_number(doc.get("cap_min", 10), "cap_min", low=0, high=100000)),
        cap_fraction=_number(doc.get("cap_fraction", 0.005), "cap_fraction", low=0, high=1),
        allow=frozenset(allow),
        clean_s=_number(doc.get("clean_s", 3600), "clean_s", low=60, high=30 * 86400),
    )


def _number(value: Any, name: str, *, low: float, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise PolicyError(f"{name} is a number from {low:g} to {high:g}, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class Reading:
    at: float
    values: Mapping[str, float]


@dataclass
class Decision:
    kind: str  # isolate | capped | restore
    port: Port
    at: float
    reasons: list[str] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)  # the readings that caused it

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "switch": self.port[0],
            "port": self.port[1],
            "at": self.at,
            "reasons": list(self.reasons),
            "samples": list(self.samples),
        }


class Evaluator:
    """One fabric's ports under a policy: fed readings in time order, answers decisions. A port's
    history keeps the readings where its values changed (the value in between is the last one),
    back to the one at or before the longest window's start."""

    def __init__(
        self,
        policy: Policy,
        ports: int,
        isolated: Mapping[Port, float] | None = None,
        peers: Mapping[Port, Port] | None = None,
    ) -> None:
        self.policy = policy
        self.ports = ports
        #: each switch-to-switch link's two ends: one decision per link, never both of its ends
        self.peers: Mapping[Port, Port] = peers or {}
        self.isolated: dict[Port, float] = dict(isolated or {})  # port → last time it crossed
        self.history: dict[Port, deque[Reading]] = {}
        self.keep_s = max((r.window_s for r in policy.rules), default=0.0)
        self.gauges = any(r.gauge for r in policy.rules)

    def observe(self, at: float, readings: Mapping[Port, Mapping[str, float]]) -> list[Decision]:
        """One sweep's totals (counters) and values (gauges) per port at ``at``."""
        out: list[Decision] = []
        crossing: list[Decision] = []
        for port, values in readings.items():
            history = self.history.setdefault(port, deque())
            if not history or history[-1].values != values:  # only changes are kept: a quiet port costs nothing
                history.append(Reading(at, dict(values)))
            while len(history) > 2 and history[1].at <= at - self.keep_s:
                history.popleft()
            if len(history) < 2 and not self.gauges:
                continue
            reasons, samples = self._crossed(history, at)
            if not reasons:
                continue
            if port in self.isolated:
                self.isolated[port] = at  # still crossing (or crossing again): the clean period restarts
                continue
            peer = self.peers.get(port)
            if port in self.policy.allow or peer in self.policy.allow:
                continue
            if peer in self.isolated:  # the link is isolated at its other end
                self.isolated[peer] = at
                continue
            crossing.append(Decision("isolate", port, at, reasons, samples))
        chosen: set[Port] = set()
        for decision in sorted(crossing, key=lambda d: d.port):
            if self.peers.get(decision.port) in chosen:
                continue  # both ends crossed: the link is isolated at the first
            chosen.add(decision.port)
        crossing = [d for d in crossing if d.port in chosen]
        room = self.policy.cap(self.ports) - len(self.isolated)
        for decision in sorted(crossing, key=lambda d: d.port):
            if room <= 0:
                decision.kind = "capped"
                decision.reasons.append(f"the cap of {self.policy.cap(self.ports)} isolated ports is reached")
            else:
                room -= 1
                self.isolated[decision.port] = at
            out.append(decision)
        for port, last in sorted(self.isolated.items()):
            if at - last >= self.policy.clean_s:
                del self.isolated[port]
                clean = f"no rule crossed for {at - last:.0f} s (clean period {self.policy.clean_s:.0f} s)"
                out.append(Decision("restore", port, at, [clean]))
        return out

    def _crossed(self, history: deque[Reading], at: float) -> tuple[list[str], list[dict[str, Any]]]:
        reasons: list[str] = []
        used: set[int] = set()
        now = history[-1]
        for rule in self.policy.rules:
            if rule.counter not in now.values:
                continue
            if rule.gauge:
                if now.values[rule.counter] > rule.threshold:
                    reasons.append(f"{rule.counter} {now.values[rule.counter]:g} > {rule.threshold:g}")
                    used.add(len(history) - 1)
                continue
            start = 0
            for i, reading in enumerate(history):
                if reading.at <= at - rule.window_s:
                    start = i
            rise = 0.0
            for i in range(start + 1, len(history)):
                before = history[i - 1].values.get(rule.counter, 0.0)
                after = history[i].values.get(rule.counter, 0.0)
                rise += after - before if after >= before else after  # went back: counts from zero
            if rise > rule.threshold:
                span = at - history[start].at
                reasons.append(
                    f"{rule.counter} +{rise:g} in {span:.0f} s > {rule.threshold:g} per {rule.window_s:.0f} s"
                )
                used |= set(range(start, len(history)))
        samples = [{"at": history[i].at, **{k: v for k, v in history[i].values.items()}} for i in sorted(used)]
        return reasons, samples[-60:]


def replay(
    policy: Policy,
    readings: Iterable[tuple[float, Port, Mapping[str, float]]],
    *,
    ports: int,
    peers: Mapping[Port, Port] | None = None,
) -> list[Decision]:
    """The decisions the policy would have made over recorded readings ``(at, port, values)``
    (in time order; readings with the same ``at`` form one sweep)."""
    evaluator = Evaluator(policy, ports, peers=peers)
    out: list[Decision] = []
    sweep: dict[Port, Mapping[str, float]] = {}
    current: float | None = None
    for at, port, values in readings:
        if current is not None and at != current:
            out += evaluator.observe(current, sweep)
            sweep = {}
        current = at
        sweep[port] = values
    if current is not None:
        out += evaluator.observe(current, sweep)
    return out
