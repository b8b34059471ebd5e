"""Slurm-style hostlist compression: su01-n01 … su01-n32 → "su01-n[01-32]"."""

from __future__ import annotations

import re
from collections import defaultdict

_TAIL = re.compile(r"^(.*?)(\d+)$")


def compress(names: list[str]) -> str:
    """Compress names into Slurm hostlist expressions, keeping first-seen prefix order."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    plain: list[str] = []
    order: list[tuple[str, int] | str] = []
    for name in names:
        m = _TAIL.match(name)
        if not m:
            plain.append(name)
            order.append(name)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts: list[str] = []
    for entry in order:
        if isinstance(entry, str):
            parts.append(entry)
            continue
        prefix, width = entry
        nums = sorted(set(groups[entry]))
        ranges: list[str] = []
        i = 0
        while i < len(nums):
            j = i
            while j + 1 < len(nums) and nums[j + 1] == nums[j] + 1:
                j += 1
            lo, hi = f"{nums[i]:0{width}d}", f"{nums[j]:0{width}d}"
            ranges.append(lo if i == j else f"{lo}-{hi}")
            i = j + 1
        if len(nums) == 1:
            parts.append(f"{prefix}{ranges[0]}")
        else:
            parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)
