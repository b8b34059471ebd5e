"""QoS: ``qos-policy.conf`` (P_Key → SL via ``qos-ulps``) and the SL→VL / VL arbitration options.

The console manages the simplified ``qos-ulps`` section of OpenSM's QoS policy file only::

    qos-ulps
        default          : 0
        any, pkey 0x0003 : 1
    end-qos-ulps

SL→VL mapping and VL arbitration live in ``opensm.conf`` (``qos_max_vls``, ``qos_high_limit``,
``qos_vlarb_high``, ``qos_vlarb_low``, ``qos_sl2vl``); :func:`render_qos_options` produces them
for :mod:`console.fabric.opensm.conf`. Both are re-read on SIGHUP.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from console.fabric.opensm.lint import (
    ArtefactRejected,
    LintProblem,
    control_char_problems,
    long_line_problems,
)

ARTEFACT = "qos-policy.conf"
_RULE_RE = re.compile(r"^(?P<ulp>any|ipoib)\s*,\s*pkey\s+(?P<pkey>\S+)\s*:\s*(?P<sl>\S+)$", re.IGNORECASE)
_DEFAULT_RE = re.compile(r"^default\s*:\s*(?P<sl>\S+)$", re.IGNORECASE)


@dataclass(frozen=True)
class QosClass:
    """Traffic on one partition gets one service level."""

    pkey: int
    sl: int
    label: str = ""


@dataclass(frozen=True)
class QosPolicy:
    """The ``qos-ulps`` rules: a default SL and one SL per partition."""

    default_sl: int = 0
    classes: Sequence[QosClass] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", tuple(self.classes))


@dataclass(frozen=True)
class QosOptions:
    """SL→VL map and VL arbitration tables for ``opensm.conf`` (IBA 7.6.6 / 7.6.9)."""

    max_vls: int = 8
    high_limit: int = 0
    vlarb_high: Sequence[tuple[int, int]] = ((0, 4),)
    vlarb_low: Sequence[tuple[int, int]] = tuple((vl, 4) for vl in range(8))
    sl2vl: Sequence[int] = (0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7)

    def validate(self) -> list[str]:
        """Reasons these options are unusable (empty when fine)."""
        errors = []
        if self.max_vls not in (1, 2, 4, 8, 15):
            errors.append(f"qos_max_vls={self.max_vls}: expected 1, 2, 4, 8 or 15")
        if not 0 <= self.high_limit <= 255:
            errors.append(f"qos_high_limit={self.high_limit}: expected 0-255")
        for name in ("vlarb_high", "vlarb_low"):
            table = getattr(self, name)
            if len(table) > 64:
                errors.append(f"qos_{name}: at most 64 entries")
            for vl, weight in table:
                if not 0 <= vl <= 14 or not 0 <= weight <= 255:
                    errors.append(f"qos_{name}: entry {vl}:{weight} outside VL 0-14 / 0-255")
        if len(self.sl2vl) != 16:
            errors.append("qos_sl2vl: needs exactly 16 entries (SL0-SL15)")
        for vl in self.sl2vl:
            if not (0 <= vl < self.max_vls or vl == 15):
                errors.append(f"qos_sl2vl: VL {vl} not below qos_max_vls={self.max_vls}")
        return errors


def render_qos_policy(policy: QosPolicy) -> str:
    """Render ``qos-policy.conf`` (rules ordered by P_Key). Raises ValueError when invalid."""
    errors = []
    if not 0 <= policy.default_sl <= 15:
        errors.append(f"default SL {policy.default_sl} outside 0-15")
    pkeys = [c.pkey for c in policy.classes]
    for c in policy.classes:
        if not 0x0001 <= c.pkey <= 0x7FFF:
            errors.append(f"P_Key {c.pkey:#06x} outside 0x0001-0x7fff")
        if not 0 <= c.sl <= 15:
            errors.append(f"SL {c.sl} outside 0-15")
        if pkeys.count(c.pkey) > 1:
            errors.append(f"P_Key {c.pkey:#06x} has more than one rule")
        if "#" in c.label or "\n" in c.label:
            errors.append(f"label {c.label!r} may not contain '#' or newlines")
    if errors:
        raise ValueError("; ".join(sorted(set(errors))))
    lines = ["# Managed by the InfiniBand console; edits here are overwritten.", "qos-ulps"]
    lines.append(f"    default : {policy.default_sl}")
    for c in sorted(policy.classes, key=lambda c: c.pkey):
        comment = f"  # {c.label}" if c.label else ""
        lines.append(f"    any, pkey {c.pkey:#06x} : {c.sl}{comment}")
    lines.append("end-qos-ulps")
    return "\n".join(lines) + "\n"


def _int(text: str) -> int | None:
    try:
        return int(text, 0)
    except ValueError:
        return None


def lint_qos_policy(text: str) -> list[LintProblem]:
    """Refuse anything outside the ``qos-ulps`` subset we manage, bad SLs and repeated P_Keys."""
    problems = control_char_problems(ARTEFACT, text) + long_line_problems(ARTEFACT, text)
    state = "before"
    seen: dict[int, int] = {}
    have_default = False

    def bad(line: int | None, code: str, message: str) -> None:
        problems.append(LintProblem(ARTEFACT, line, code, message))

    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0].strip()
        if not body:
            continue
        if state == "before":
            if body == "qos-ulps":
                state = "inside"
            else:
                bad(lineno, "syntax", f"expected 'qos-ulps', found {body!r}")
            continue
        if state == "after":
            bad(lineno, "syntax", f"unexpected {body!r} after end-qos-ulps")
            continue
        if body == "end-qos-ulps":
            state = "after"
            continue
        if m := _DEFAULT_RE.match(body):
            sl = _int(m["sl"])
            if have_default:
                bad(lineno, "duplicate-default", "default SL given twice")
            have_default = True
            if sl is None or not 0 <= sl <= 15:
                bad(lineno, "bad-sl", f"SL {m['sl']!r} outside 0-15")
            continue
        m = _RULE_RE.match(body)
        if not m:
            bad(lineno, "syntax", f"unsupported qos-ulps rule {body!r}")
            continue
        pkey, sl = _int(m["pkey"]), _int(m["sl"])
        if pkey is None or not 0x0001 <= pkey & 0x7FFF <= 0x7FFF or pkey > 0xFFFF:
            bad(lineno, "bad-pkey", f"malformed P_Key {m['pkey']!r}")
        elif pkey & 0x7FFF in seen:
            bad(
                lineno,
                "duplicate-pkey",
                f"P_Key {pkey & 0x7FFF:#06x} already has a rule on line {seen[pkey & 0x7FFF]} "
                "(OpenSM uses the first match)",
            )
        else:
            seen[pkey & 0x7FFF] = lineno
        if sl is None or not 0 <= sl <= 15:
            bad(lineno, "bad-sl", f"SL {m['sl']!r} outside 0-15")
    if state == "before":
        bad(None, "syntax", "no qos-ulps section")
    elif state == "inside":
        bad(None, "unterminated", "qos-ulps section not closed by end-qos-ulps")
    return problems


def parse_qos_policy(text: str) -> QosPolicy:
    """Parse a lint-clean ``qos-policy.conf`` back into a :class:`QosPolicy`."""
    problems = lint_qos_policy(text)
    if problems:
        raise ArtefactRejected(problems)
    default_sl = 0
    classes = []
    for raw in text.splitlines():
        body, _, comment = raw.partition("#")
        body = body.strip()
        if m := _DEFAULT_RE.match(body):
            default_sl = int(m["sl"], 0)
        elif m := _RULE_RE.match(body):
            classes.append(QosClass(int(m["pkey"], 0) & 0x7FFF, int(m["sl"], 0), comment.strip()))
    return QosPolicy(default_sl, tuple(classes))


def render_qos_options(options: QosOptions) -> dict[str, str]:
    """The ``opensm.conf`` QoS options as strings (``qos`` itself is set by the caller)."""
    errors = options.validate()
    if errors:
        raise ValueError("; ".join(errors))
    return {
        "qos_max_vls": str(options.max_vls),
        "qos_high_limit": str(options.high_limit),
        "qos_vlarb_high": ",".join(f"{vl}:{w}" for vl, w in options.vlarb_high),
        "qos_vlarb_low": ",".join(f"{vl}:{w}" for vl, w in options.vlarb_low),
        "qos_sl2vl": ",".join(str(vl) for vl in options.sl2vl),
    }


def parse_qos_options(values: dict[str, str]) -> QosOptions | list[str]:
    """Rebuild :class:`QosOptions` from ``opensm.conf`` values, or return the errors."""
    try:
        opts = QosOptions(
            max_vls=int(values["qos_max_vls"], 0),
            high_limit=int(values["qos_high_limit"], 0),
            vlarb_high=tuple(
                (int(a, 0), int(b, 0)) for a, b in (p.split(":") for p in values["qos_vlarb_high"].split(","))
            ),
            vlarb_low=tuple(
                (int(a, 0), int(b, 0)) for a, b in (p.split(":") for p in values["qos_vlarb_low"].split(","))
            ),
            sl2vl=tuple(int(v, 0) for v in values["qos_sl2vl"].split(",")),
        )
    except (KeyError, ValueError) as exc:
        return [f"QoS options unreadable: {exc}"]
    return opts.validate() or opts
