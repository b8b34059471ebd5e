"""Shared vocabulary of the OpenSM artefact linters: problems, the rejection error, GUIDs.

Every linter in this package returns a list of :class:`LintProblem`; an empty list means the
artefact may be handed to OpenSM. Nothing here imports Django.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# OpenSM reads its partition and GUID files with ``fgets(line, sizeof(line) - 1, f)`` on a
# 4,096-byte buffer: at most 4,094 characters per read. Anything longer is split mid-token and
# the tail parsed as a new line, so the whole file may change meaning. We refuse such lines.
OPENSM_MAX_LINE = 4094

_GUID_RE = re.compile(r"^0x[0-9a-fA-F]{1,16}$")


@dataclass(frozen=True)
class LintProblem:
    """One reason an artefact must not reach OpenSM, located as precisely as we can."""

    artefact: str
    line: int | None
    code: str
    message: str

    def __str__(self) -> str:
        where = f"{self.artefact}:{self.line}" if self.line is not None else self.artefact
        return f"{where}: {self.code}: {self.message}"


class ArtefactRejected(ValueError):
    """Raised when an artefact (or a set of them) fails lint and was therefore not written."""

    def __init__(self, problems: Iterable[LintProblem]) -> None:
        self.problems: list[LintProblem] = list(problems)
        summary = "; ".join(str(p) for p in self.problems[:5])
        more = f" (+{len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        super().__init__(f"artefact refused: {summary}{more}")


def parse_guid(text: str) -> int | None:
    """Return the GUID in ``text`` or None when it is not a strict ``0x`` hex GUID.

    OpenSM itself uses ``strtoull(.., 0)``, so ``0123`` would silently be octal and ``12``
    decimal. The console only ever writes ``0x`` + up to 16 hex digits and refuses the rest.
    """
    text = text.strip()
    if not _GUID_RE.match(text):
        return None
    value = int(text, 16)
    return value or None


def format_guid(guid: int) -> str:
    """Render a GUID the way every console artefact spells it: ``0x`` + 16 hex digits."""
    if not 0 < guid < 1 << 64:
        raise ValueError(f"GUID out of range: {guid!r}")
    return f"0x{guid:016x}"


def long_line_problems(artefact: str, text: str) -> list[LintProblem]:
    """Flag lines OpenSM would cut (see :data:`OPENSM_MAX_LINE`)."""
    problems = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if len(line) > OPENSM_MAX_LINE:
            problems.append(
                LintProblem(
                    artefact,
                    lineno,
                    "line-too-long",
                    f"{len(line)} characters; OpenSM reads at most {OPENSM_MAX_LINE} per line "
                    "and would parse the rest as a new line",
                )
            )
    return problems


def control_char_problems(artefact: str, text: str) -> list[LintProblem]:
    """Flag NUL and other control characters, which C string handling truncates silently."""
    problems = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        bad = [c for c in line if (ord(c) < 32 and c != "\t") or ord(c) == 127]
        if bad:
            problems.append(LintProblem(artefact, lineno, "control-char", f"control character {bad[0]!r}"))
        elif not line.isascii():
            problems.append(LintProblem(artefact, lineno, "non-ascii", "non-ASCII character"))
    return problems


def render_guid_file(guids: Iterable[int]) -> str:
    """Render a GUID list file (``root_guid_file``, ``cn_guid_file``): one GUID per line.

    Sorted and de-duplicated so the same design always yields the same bytes.
    """
    unique = sorted(set(guids))
    return "".join(f"{format_guid(g)}\n" for g in unique)


def parse_guid_file(text: str) -> list[int]:
    """Return the GUIDs of a GUID list file, ignoring blank lines and ``#`` comments."""
    out = []
    for line in text.splitlines():
        body = line.split("#", 1)[0].strip()
        if body:
            guid = parse_guid(body)
            if guid is not None:
                out.append(guid)
    return out


def lint_guid_file(text: str, *, artefact: str = "guids.conf") -> list[LintProblem]:
    """Refuse malformed or repeated GUIDs and empty files in a GUID list file."""
    problems = long_line_problems(artefact, text) + control_char_problems(artefact, text)
    seen: dict[int, int] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        body = line.split("#", 1)[0].strip()
        if not body:
            continue
        guid = parse_guid(body)
        if guid is None:
            problems.append(LintProblem(artefact, lineno, "bad-guid", f"malformed GUID {body!r}"))
        elif guid in seen:
            problems.append(
                LintProblem(
                    artefact,
                    lineno,
                    "duplicate-guid",
                    f"GUID {format_guid(guid)} already listed on line {seen[guid]}",
                )
            )
        else:
            seen[guid] = lineno
    if not seen and not problems:
        # An empty root file makes ftree guess the roots, which is exactly what the file avoids.
        problems.append(LintProblem(artefact, None, "empty", "no GUIDs listed"))
    return problems
