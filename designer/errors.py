"""Error and issue types shared by the designer's generators, validators and parsers."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, slots=True)
class Issue:
    """One validation finding: which element, what is wrong, what would fit."""

    severity: str  # "error" | "warning"
    code: str  # stable machine-readable code, e.g. "port-exhaustion"
    element: str  # the switch, node, link or option the finding is about
    message: str  # the sentence shown to the operator

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


class DesignerError(Exception):
    """Base class of every designer error."""


class PlanError(DesignerError):
    """The requested design cannot be built; `issues` say why and what would fit."""

    def __init__(self, issues: list[Issue] | Issue | str, *, element: str = "options") -> None:
        if isinstance(issues, str):
            issues = [Issue("error", "invalid-option", element, issues)]
        elif isinstance(issues, Issue):
            issues = [issues]
        self.issues: list[Issue] = list(issues)
        super().__init__("; ".join(i.message for i in self.issues))


class ParseError(DesignerError):
    """An import file could not be understood; `line` is 1-based (0 when unknown)."""

    def __init__(self, message: str, *, line: int = 0, text: str = "") -> None:
        self.line = line
        self.text = text
        self.reason = message
        where = f"line {line}: " if line else ""
        shown = f" ({text.strip()[:120]!r})" if text.strip() else ""
        super().__init__(f"{where}{message}{shown}")


class UnknownItemError(DesignerError, KeyError):
    """A catalogue lookup failed; the message lists what exists."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        self.message = f"unknown {kind} {name!r}: choose one of {', '.join(known)}"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message
