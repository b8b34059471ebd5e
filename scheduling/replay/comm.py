"""How long a job runs where it is placed: the replay's communication model (issue 39).

Without it the replay assumes a job runs as long wherever it lands. It does not: a multi-node
training step ends in collectives (a ring all-reduce of the gradients), and the ring runs at the
bandwidth of the slowest tier it crosses. Inside one leaf group of a rail-optimised fabric a
rail's traffic stays on its leaf; across leaf groups it climbs to the spines, where it shares
uplinks with every other job's traffic (ECMP collisions, the tier's oversubscription); across
pods it climbs to the core.

The model, switchable (:attr:`ReplayOptions.comm`):

- a job on one node, or on one leaf group, runs its trace duration;
- a job whose traffic crosses the spines runs ``duration / spine_throughput``, across pods
  ``duration / core_throughput``;
- an oversubscribed tier (``oversubscription`` o:1, the design's) stretches the part the tier adds
  by o: ``duration × (1 + (1 / throughput − 1) × o)``.

Calibration: the throughputs are Fluidstack's published measurement of one 256-GPU training job
placed three ways on an H100 InfiniBand cluster (a Fluidstack practitioner post, listed in the
project brief's table of published placement figures; docs/benchmarks.md cites it): first-fit (scattered over leaf groups, crossing the spines) ran at **65 %** and a
placement split across pods at **46 %** of the throughput of its topology-aware (packed)
placement. They are a single job's figures, applied to every multi-node job: the model is
coarse (a small job's collectives are a smaller share of its step), and says so.

The scheduler does not know the stretch in advance: a multi-node job asks for its duration
stretched by the worst tier the fabric has (its time limit), and ends when its placement's
stretched duration is over, freeing the rest of its window early (as a real job ends before its
time limit). Goodput (:func:`goodput`) counts the trace's durations — the useful work — against
the time the pool was busy.
"""

from __future__ import annotations

from dataclasses import dataclass

from designer.graph import FabricGraph
from designer.metrics import compute_metrics
from scheduling.placement import Placement
from scheduling.placement.topology import HOPS_CROSS_POD, HOPS_SAME_GROUP

#: Fluidstack's 256-GPU job: first-fit and split-pod throughput relative to topology-aware.
FLUIDSTACK_SPINE = 0.65
FLUIDSTACK_CORE = 0.46


@dataclass(frozen=True, slots=True)
class CommModel:
    """Throughput of a job by the highest tier its traffic crosses (1.0 inside a leaf group)."""

    spine_throughput: float = FLUIDSTACK_SPINE
    core_throughput: float = FLUIDSTACK_CORE
    #: The spine and core tiers' oversubscription (o in o:1; 1.0 is non-blocking).
    oversubscription: float = 1.0

    def __post_init__(self) -> None:
        if not (0 < self.core_throughput <= self.spine_throughput <= 1):
            raise ValueError("throughputs need 0 < core <= spine <= 1")
        if self.oversubscription < 1:
            raise ValueError("oversubscription is o in o:1, at least 1")

    def _stretch(self, throughput: float) -> float:
        return 1.0 + (1.0 / throughput - 1.0) * self.oversubscription

    def stretch(self, placement: Placement) -> float:
        """How much longer than its trace duration a job runs on ``placement``."""
        if len(placement.node_ids) <= 1 or placement.max_hops <= HOPS_SAME_GROUP:
            return 1.0
        if placement.max_hops >= HOPS_CROSS_POD:
            return self._stretch(self.core_throughput)
        return self._stretch(self.spine_throughput)

    def limit(self, nodes: int, pods: int) -> float:
        """The stretch a job of ``nodes`` nodes asks for as its time limit: the worst tier the
        fabric has (the core only with several pods)."""
        if nodes <= 1:
            return 1.0
        return self._stretch(self.core_throughput if pods > 1 else self.spine_throughput)


def comm_model_of(graph: FabricGraph) -> CommModel:
    """The model for a designed fabric: Fluidstack's throughputs, the design's oversubscription."""
    return CommModel(oversubscription=oversubscription_of(compute_metrics(graph).get("oversubscription")))


def oversubscription_of(ratio: str | None) -> float:
    """``"2:1"`` → 2.0 (the design's metric); 1.0 when unknown."""
    if not ratio or ":" not in ratio:
        return 1.0
    down, _, up = ratio.partition(":")
    try:
        return max(1.0, float(down) / float(up))
    except (ValueError, ZeroDivisionError):
        return 1.0
