"""Slurm hostlist compression against examples written out by hand (as ``scontrol show hostlist``
prints them), and a round trip through expansion."""

from __future__ import annotations

import pytest

from scheduling.hostlist import compress, expand

EXAMPLES = [
    (["dgx-su1-001", "dgx-su1-002", "dgx-su1-003", "dgx-su1-004", "dgx-su1-007"], "dgx-su1-[001-004,007]"),
    (["tux1", "tux2", "tux3", "tux5"], "tux[1-3,5]"),
    (["node9", "node10", "node11"], "node[9-11]"),
    (["n099", "n100", "n101"], "n[099-101]"),
    (["a1", "a01"], "a[01,1]"),
    (["gpu-007"], "gpu-007"),
    (["login", "dgx-2", "dgx-1", "dgx-2"], "login,dgx-[1-2]"),
    (["su2-n003", "su1-n001", "su1-n002", "su2-n004"], "su2-n[003-004],su1-n[001-002]"),
    ([], ""),
]


@pytest.mark.parametrize(("hosts", "expression"), EXAMPLES)
def test_compress(hosts: list[str], expression: str) -> None:
    assert compress(hosts) == expression


@pytest.mark.parametrize(("hosts", "expression"), EXAMPLES)
def test_expand_gives_the_hosts_back(hosts: list[str], expression: str) -> None:
    assert sorted(expand(expression)) == sorted(set(hosts))


def test_a_large_gappy_set_round_trips() -> None:
    hosts = [f"dgx-su{su}-{n:03d}" for su in (1, 3) for n in range(1, 33) if n % 5]
    expression = compress(hosts)
    assert expression.startswith("dgx-su1-[001-004,006-009,011-014,")
    assert sorted(expand(expression)) == sorted(hosts)
