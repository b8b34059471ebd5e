"""Warnings summarised: one line per kind with its count and up to five examples.

Real fabrics produce the same finding thousands of times (a "has no cable type" per link); the
CLI, API and page show one line per kind, the JSON keeps the full list for automation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

EXAMPLES = 5
#: validation's cap line: "… and 1,094 more no-cable findings" (the count of what it left out).
_MORE = re.compile(r"^… and ([\d,]+) more (\S+) findings$")


def summarise(findings: Iterable[Mapping[str, Any]], examples: int = EXAMPLES) -> list[str]:
    """``code (count): first message — e.g. element, element…`` per kind, in first-seen order."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    shown: dict[str, list[str]] = {}
    for f in findings:
        code = str(f.get("code", "warning"))
        more = _MORE.match(str(f.get("message", "")))
        if more:
            code = more.group(2)
            counts[code] = counts.get(code, 0) + int(more.group(1).replace(",", ""))
            continue
        counts[code] = counts.get(code, 0) + 1
        first.setdefault(code, str(f.get("message", "")))
        element = str(f.get("element", ""))
        if element and len(shown.setdefault(code, [])) < examples and element not in shown[code]:
            shown[code].append(element)
    lines = []
    for code, count in counts.items():
        line = f"{code} ({count:,}): {first.get(code, '')}"
        if count > 1 and shown.get(code):
            line += " — e.g. " + ", ".join(shown[code])
        lines.append(line)
    return lines


def import_summary(
    summary: dict[str, Any],
    findings: list[dict[str, Any]],
    report: dict[str, Any],
    validation_warnings: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A validated import's summary: ``warnings`` one line per kind, ``warnings_full`` every finding.

    ``findings`` are the import's own (reader, map, inference); the validation warnings follow
    them, uncapped when given (else the summary's, capped per code). ``import`` carries the
    inference report without the findings.
    """
    if validation_warnings is None:
        validation_warnings = [i for i in summary.get("issues", []) if i.get("severity") == "warning"]
    full = list(findings) + list(validation_warnings)
    out = dict(summary)
    out["warnings"] = summarise(full)
    out["warnings_full"] = full
    out["import"] = {k: v for k, v in report.items() if k != "findings"}
    return out
