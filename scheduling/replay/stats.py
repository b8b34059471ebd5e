"""Statistics the replay reports share (plain Python)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], pct: float) -> float:
    """Nearest-rank percentile (0.0 for no values)."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return float(ordered[rank - 1])
