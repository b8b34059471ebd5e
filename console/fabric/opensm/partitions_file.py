"""The whole ``partitions.conf`` the console writes: its own partitions, then the operator's.

The console's partitions are rendered and linted strictly (:mod:`.partitions`). Partitions it
did not write (an operator's storage partition, found on the SM host) are kept exactly as
written, between two marker lines, and linted the way OpenSM reads them
(:mod:`.partitions_live`): only what would make OpenSM drop the whole file is refused there,
and a P_Key of theirs that is also one of the console's (OpenSM would merge the two) anywhere.

Which statements of a live file are the operator's (:func:`hand_written`): those whose P_Key is
neither one the console renders now nor one it wrote last (the last-known-good copy), so a
partition the console wrote and no longer wants is removed, and one it never wrote is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from console.fabric.opensm.lint import LintProblem
from console.fabric.opensm.partitions import (
    ARTEFACT,
    DEFAULT_PKEY,
    Partition,
    lint_partitions,
    parse_partitions,
    render_partitions,
)
from console.fabric.opensm.partitions_live import BEGIN, END, LiveStatement, as_partitions, read_live

HEADER = "# Managed by the InfiniBand console; partitions it did not write are kept as written."


@dataclass(frozen=True)
class OperatorPartition:
    """A partition the console did not write: its P_Key, name and text as written."""

    pkey: int
    name: str
    raw: str


def render_file(
    partitions: Iterable[Partition], *, include_default: bool = True, operator: Sequence[OperatorPartition] = ()
) -> str:
    """The console's partitions (:func:`render_partitions`), then the operator's block."""
    text = render_partitions(partitions, include_default=include_default).replace(
        "# Managed by the InfiniBand console; edits here are overwritten.", HEADER, 1
    )
    if not operator:
        return text
    body = "".join(p.raw if p.raw.endswith("\n") else p.raw + "\n" for p in sorted(operator, key=lambda p: p.pkey))
    return f"{text}\n{BEGIN}\n{body}{END}\n"


def with_operator(text: str, extra: Sequence[OperatorPartition]) -> str:
    """``text`` (a file the console wrote) with ``extra`` added to its operator block."""
    if not extra:
        return text
    body = "".join(p.raw if p.raw.endswith("\n") else p.raw + "\n" for p in extra)
    if f"\n{END}\n" in text:
        return text.replace(f"\n{END}\n", f"\n{body}{END}\n", 1)
    return f"{text}\n{BEGIN}\n{body}{END}\n"


def _split(text: str) -> tuple[str, str, int | None]:
    """(the console's part, the operator block, the block's first line), each with the other's
    lines blanked so that line numbers stay those of the file."""
    lines = text.split("\n")
    try:
        begin = lines.index(BEGIN)
        end = lines.index(END, begin)
    except ValueError:
        return text, "", None
    console = lines[: begin + 1] + [""] * (end - begin - 1) + lines[end:]
    block = [""] * (begin + 1) + lines[begin + 1 : end] + [""] * (len(lines) - end)
    return "\n".join(console), "\n".join(block), begin + 2


def lint_file(text: str, *, require_default: bool = True) -> list[LintProblem]:
    """Strict lint of the console's part, OpenSM's own reading of the operator block, and no
    P_Key in both."""
    console, block, first = _split(text)
    problems = lint_partitions(console, require_default=require_default)
    if first is None:
        return problems
    live = read_live(block)
    problems += [p for p in live.problems if p.code != "empty"]
    mine = {p.pkey: p.name for p in parse_partitions(console, require_default=False)} if not problems else {}
    for st in live.statements:
        if st.pkey is None:
            problems.append(
                LintProblem(ARTEFACT, st.line, "missing-pkey", f"operator partition {st.name!r} has no P_Key")
            )
        elif st.pkey in mine or st.pkey == DEFAULT_PKEY:
            problems.append(
                LintProblem(
                    ARTEFACT,
                    st.line,
                    "duplicate-pkey",
                    f"operator partition {st.name!r} uses P_Key {st.pkey:#06x} of the console's "
                    f"{mine.get(st.pkey, 'Default')!r} (OpenSM would merge them)",
                )
            )
    return sorted(problems, key=lambda p: (p.line or 0, p.code))


def parse_file(text: str, *, require_default: bool = True) -> list[Partition]:
    """The console's partitions of a lint-clean file (the operator block is not the console's)."""
    return parse_partitions(_split(text)[0], require_default=require_default)


def hand_written(live: str | None, last_written: str | None, rendered: Iterable[int]) -> list[OperatorPartition]:
    """The partitions of ``live`` the console did not write: P_Keys neither in ``rendered`` (the
    console's and the operator partitions it knows, and those an operator deleted in the
    console) nor among the console's own in ``last_written`` (statements of one P_Key together,
    as OpenSM merges them). A live file OpenSM cannot read keeps nothing (its partitions never
    reached the ports)."""
    if not live:
        return []
    found = read_live(live)
    if found.problems:
        return []
    ours = set(rendered) | {DEFAULT_PKEY}
    if last_written:
        # Only the console's own part: the operator block it copied stays the operator's.
        last = read_live(_split(last_written)[0])
        ours |= {st.pkey for st in last.statements if st.pkey is not None}
    groups: dict[int, list[LiveStatement]] = {}
    for st in found.statements:
        if st.pkey is not None and st.pkey not in ours:
            groups.setdefault(st.pkey, []).append(st)
    return [
        OperatorPartition(pkey, sts[0].name or f"pkey-{pkey:04x}", "".join(found.raw(st) for st in sts))
        for pkey, sts in sorted(groups.items())
    ]


def live_differences(live: str | None, partitions: Iterable[Partition]) -> list[str]:
    """How the live file's partitions differ from ``partitions`` (the console's, Default
    included): a P_Key missing or with other members. Other partitions in it are not compared
    (the operator's, or the isolation audit's business)."""
    if live is None:
        return [f"no live {ARTEFACT}"]
    found = read_live(live)
    if found.problems:
        return [f"live {ARTEFACT} would not parse: {found.problems[0]}"]
    by_pkey = {p.pkey: p for p in as_partitions(found.statements)}
    out = []
    for want in partitions:
        got = by_pkey.get(want.pkey)
        if got is None:
            out.append(f"live {ARTEFACT} lacks {want.name} ({want.pkey:#06x})")
        elif _members(got) != _members(want):
            out.append(f"live {ARTEFACT} has other members in {want.name} ({want.pkey:#06x})")
    return out


def _members(p: Partition) -> set[tuple[int | str, str]]:
    return {(m.port, p.effective_membership(m).value) for m in p.members}
