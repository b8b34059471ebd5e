"""Slurm hostlist expressions: ``dgx-su1-[001-004,007]`` for dgx-su1-001 … dgx-su1-004 and dgx-su1-007.

Written here rather than taken from PyPI: ``python-hostlist`` (the well-kept one) is GPL-2.0+,
which an Apache-2.0 console cannot depend on, and the console needs only the two small pure
functions below (no Slurm configuration, no multi-dimensional ranges).

The numeric suffix keeps its zero padding: ``001``-style numbers form ranges of their width
(``[099-100]``), unpadded ones natural ranges (``node[9-10]``). Names without a numeric suffix
stand alone. Groups keep the order in which their prefix first appears; numbers are sorted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_TAIL = re.compile(r"^(.*?)(\d+)$")
_GROUP = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?(?:,|$)")


def _pad(n: int, width: int) -> str:
    return str(n).zfill(width)


def compress(hosts: Iterable[str]) -> str:
    """The shortest Slurm-style expression of ``hosts`` (duplicates dropped)."""
    by_prefix: dict[str, list[tuple[int, str]]] = {}
    order: list[str | tuple[str]] = []  # a prefix (str) or a plain name (1-tuple)
    for host in dict.fromkeys(hosts):
        m = _TAIL.match(host)
        if m is None:
            order.append((host,))
            continue
        prefix, digits = m.groups()
        if prefix not in by_prefix:
            by_prefix[prefix] = []
            order.append(prefix)
        by_prefix[prefix].append((int(digits), digits))
    parts = []
    for item in order:
        if isinstance(item, tuple):
            parts.append(item[0])
            continue
        numbers = sorted(by_prefix[item])
        if len(numbers) == 1:
            parts.append(item + numbers[0][1])
            continue
        parts.append(f"{item}[{','.join(_ranges(numbers))}]")
    return ",".join(parts)


def _ranges(numbers: list[tuple[int, str]]) -> list[str]:
    out = []
    i = 0
    while i < len(numbers):
        lo, text = numbers[i]
        width = len(text) if text.startswith("0") and len(text) > 1 else 0
        hi = lo
        while i + 1 < len(numbers) and numbers[i + 1][0] == hi + 1 and _pad(hi + 1, width) == numbers[i + 1][1]:
            i += 1
            hi += 1
        out.append(text if hi == lo else f"{text}-{_pad(hi, width)}")
        i += 1
    return out


def expand(expression: str) -> list[str]:
    """Every host of a one-dimensional hostlist expression, in its order."""
    hosts: list[str] = []
    for prefix, body in _GROUP.findall(expression):
        if body == "" and not prefix:
            continue
        if not body:
            hosts.append(prefix)
            continue
        for part in body.split(","):
            lo, _, hi = part.partition("-")
            width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
            for n in range(int(lo), int(hi or lo) + 1):
                hosts.append(prefix + _pad(n, width))
    return hosts
