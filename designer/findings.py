"""What validation reports: the report, the capped collector of findings, the lab's size limits."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from designer.errors import Issue

MAX_PER_CODE = 20


@dataclass(frozen=True)
class IbsimLimits:
    """ibsim's default table sizes and the size the lab here still brings up."""

    nodes: int = 2048
    switches: int = 256
    ports: int = 13312
    ports_per_node: int = 255
    lab_endpoints: int = 4096


@dataclass
class ValidationReport:
    """Errors make a design unbuildable or unroutable; warnings deserve a look."""

    errors: list[Issue] = field(default_factory=list)
    warnings: list[Issue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def codes(self) -> set[str]:
        return {i.code for i in self.errors + self.warnings}

    def as_dict(self) -> dict:
        return {
            "errors": [i.as_dict() for i in self.errors],
            "warnings": [i.as_dict() for i in self.warnings],
        }


class Collector:
    """Findings as they are found: capped per kind (``max_per_code``), summarised at the end."""

    def __init__(self, max_per_code: int | None = MAX_PER_CODE) -> None:
        self.cap = max_per_code if max_per_code is not None else math.inf
        self.report = ValidationReport()
        self.counts: Counter[tuple[str, str]] = Counter()  # (severity, code) → findings

    def add(self, severity: str, code: str, element: str, message: str) -> None:
        self.counts[(severity, code)] += 1
        if self.counts[(severity, code)] <= self.cap:
            target = self.report.errors if severity == "error" else self.report.warnings
            target.append(Issue(severity, code, element, message))

    def finish(self) -> ValidationReport:
        for (severity, code), n in sorted(self.counts.items()):
            if n > self.cap:
                target = self.report.errors if severity == "error" else self.report.warnings
                target.append(Issue(severity, code, "fabric", f"… and {n - int(self.cap):,} more {code} findings"))
        return self.report
