"""The lines of an import, bounded: no line of ibnetdiscover's topology or ports report, a
node-name map or a host-types file is anywhere near :data:`MAX_LINE` characters (a node
description is at most 64 bytes, a GUID 18 characters), so a longer one is refused with its
number before any pattern looks at it. That bounds every per-line regex's work, whatever its
shape: a pathological line of the field's full size (10 MB) costs one length check."""

from __future__ import annotations

from collections.abc import Iterator

from designer.errors import ParseError

MAX_LINE = 1024


def bounded_lines(text: str, what: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of ``text`` (a leading BOM dropped); ParseError naming the first
    line longer than :data:`MAX_LINE`."""
    for lineno, raw in enumerate(text.lstrip("\ufeff").splitlines(), 1):
        if len(raw) > MAX_LINE:
            raise ParseError(
                f"line is {len(raw):,} characters long; no line of {what} is longer than {MAX_LINE:,}",
                line=lineno,
                text=raw[:60],
            )
        yield lineno, raw
