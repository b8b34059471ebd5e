"""VL arbitration as the lab's traffic model applies it: how one congested port shares its line rate.

Plain code. A port's output is shared between virtual lanes the way IBA 7.6.9 (OpenSM's QoS
document) describes the two arbitration tables:

- the **high-priority** table is served first whenever it has packets, but after
  ``high_limit`` × 4 KB (one packet for 0) a waiting low-priority packet gets its turn; 255 means
  no limit. With 4 KB packets the high table can therefore take at most
  ``limit / (limit + 4 KB)`` of a link both tables want, and the low table at least the rest;
- the **low-priority** table shares what is left between its VLs in proportion to their weights;
- inside each table a VL that wants less than its share keeps what it wants and the rest goes to
  the others (work conserving, weighted max-min), and a VL in neither table (or with weight 0) is
  not served at all.

Without arbitration (one VL, first come first served) a congested port shares in proportion to
demand, which is what :func:`share` does when no tables are given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

PACKET_BYTES = 4096  # the MTU the model assumes (4 KB, InfiniBand's largest)


@dataclass(frozen=True)
class Arbitration:
    """A port's VL arbitration: the two tables as (VL, weight) entries and the high limit."""

    high: Sequence[tuple[int, int]] = ()
    low: Sequence[tuple[int, int]] = ()
    high_limit: int = 0

    def weights(self, table: str) -> dict[int, int]:
        """VL → total weight of its entries in ``table`` ("high" or "low")."""
        out: dict[int, int] = {}
        for vl, weight in self.high if table == "high" else self.low:
            out[vl] = out.get(vl, 0) + weight
        return {vl: w for vl, w in out.items() if w > 0}

    def high_fraction(self) -> float:
        """The most of a link the high table takes while the low table also has packets."""
        if self.high_limit >= 255:
            return 1.0
        burst = max(self.high_limit, 1) * PACKET_BYTES
        return burst / (burst + PACKET_BYTES)


def water_fill(demand: Mapping[int, float], weights: Mapping[int, int], total: float) -> dict[int, float]:
    """Weighted max-min share of ``total`` between ``demand``'s keys (each at most its demand)."""
    out = {key: 0.0 for key in demand}
    active = {key for key, d in demand.items() if d > 0 and weights.get(key, 0) > 0}
    left = total
    while active and left > 1e-9:
        weight_sum = sum(weights[k] for k in active)
        fair = {k: left * weights[k] / weight_sum for k in active}
        satisfied = {k for k in active if demand[k] - out[k] <= fair[k]}
        if not satisfied:
            for k in active:
                out[k] += fair[k]
            break
        for k in satisfied:
            left -= demand[k] - out[k]
            out[k] = demand[k]
        active -= satisfied
    return out


def share(demand: Mapping[int, float], capacity: float, arbitration: Arbitration | None) -> dict[int, float]:
    """What each VL of ``demand`` (bits/s wanted) gets through a port of ``capacity`` bits/s."""
    wanted = sum(demand.values())
    if wanted <= capacity:
        if arbitration is None:
            return dict(demand)
    if arbitration is None:
        return {vl: d * capacity / wanted for vl, d in demand.items()}
    high_w, low_w = arbitration.weights("high"), arbitration.weights("low")
    high = {vl: d for vl, d in demand.items() if vl in high_w}
    low = {vl: d for vl, d in demand.items() if vl not in high_w and vl in low_w}
    high_total, low_total = sum(high.values()), sum(low.values())
    high_gets = min(high_total, max(capacity * arbitration.high_fraction(), capacity - low_total))
    low_gets = min(low_total, capacity - high_gets)
    out = {vl: 0.0 for vl in demand}  # VLs in no table: never served
    out.update(water_fill(high, high_w, high_gets))
    out.update(water_fill(low, low_w, low_gets))
    return out
