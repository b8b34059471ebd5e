"""OpenSM ``partitions.conf``: data model, renderer, the project's own parser, and the linter.

OpenSM is forgiving in the worst way: a mistyped membership keyword becomes ``limited``, a
repeated P_Key is merged into the first, ``AL`` is read as ``ALL`` (it compares prefixes),
``0123`` is octal, long lines are cut, and a file that fails to parse is dropped entirely, which
makes every port a full member of the default partition. So the console never hands OpenSM a
file that this module's linter has not passed, and the renderer only produces files that pass.

The grammar follows ``man opensm`` (PARTITION CONFIGURATION) and the behaviour of
``osm_prtn_config.c``: comments start at ``#``; statements end at ``;`` and may span lines after
the ``:`` (each line's port list is split on ``,``, empty items are ignored); the definition
(``Name=PKey, flags``) must be on one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from console.fabric.opensm.lint import (
    OPENSM_MAX_LINE,
    ArtefactRejected,
    LintProblem,
    control_char_problems,
    format_guid,
    long_line_problems,
    parse_guid,
)

ARTEFACT = "partitions.conf"
DEFAULT_PKEY = 0x7FFF
MIN_PKEY = 0x0001
MAX_PKEY = 0x7FFE
PORT_KEYWORDS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")
# Flags we render and accept. OpenSM also knows scope/Q_Key/TClass/FlowLabel (multicast tuning)
# but the console does not manage them, and an unknown flag is only logged by OpenSM.
_INT_FLAGS = {"mtu": (1, 5), "rate": (2, 22), "sl": (0, 15)}
_NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
# Members per continuation line: ~25 characters each keeps lines near 250 characters, far below
# OpenSM's limit, and gives readable diffs when one member changes.
MEMBERS_PER_LINE = 8


class Membership(StrEnum):
    """How a port belongs to a partition (the top bit of the P_Key in the port's table)."""

    FULL = "full"
    LIMITED = "limited"
    BOTH = "both"


@dataclass(frozen=True, order=True)
class Member:
    """One port specifier: a port GUID (int) or one of :data:`PORT_KEYWORDS`."""

    port: int | str
    membership: Membership | None = Membership.FULL

    def __post_init__(self) -> None:
        if isinstance(self.port, str) and self.port not in PORT_KEYWORDS:
            raise ValueError(f"unknown port keyword {self.port!r}")
        if isinstance(self.port, int):
            format_guid(self.port)  # range check
        if self.membership is not None:
            object.__setattr__(self, "membership", Membership(self.membership))

    @property
    def is_keyword(self) -> bool:
        """True for ``ALL``/``ALL_CAS``/... rather than a single port GUID."""
        return isinstance(self.port, str)

    def sort_key(self) -> tuple[int, int, str]:
        """Keywords first in their documented order, then GUIDs ascending."""
        if isinstance(self.port, str):
            return (0, PORT_KEYWORDS.index(self.port), "")
        return (1, self.port, "")

    def render(self) -> str:
        """``0x0002c90300a1b2c3=full`` or ``ALL=limited``."""
        port = self.port if isinstance(self.port, str) else format_guid(self.port)
        return port if self.membership is None else f"{port}={self.membership.value}"


@dataclass(frozen=True)
class Partition:
    """One partition (P_Key) as the console manages it."""

    name: str
    pkey: int
    ipoib: bool = False
    mtu: int | None = None
    rate: int | None = None
    sl: int | None = None
    defmember: Membership | None = None
    members: Sequence[Member] = field(default_factory=tuple)
    # ``indx0`` (a flag of the partition definition in OpenSM 3.3): every member port gets this
    # P_Key at block 0 index 0 of its table.
    indx0: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "members", tuple(self.members))
        if self.defmember is not None:
            object.__setattr__(self, "defmember", Membership(self.defmember))

    def effective_membership(self, member: Member) -> Membership:
        """The membership OpenSM applies: the member's own, else ``defmember``, else limited."""
        return member.membership or self.defmember or Membership.LIMITED

    def validate(self) -> list[str]:
        """Reasons this partition cannot be rendered (empty when it can)."""
        errors = []
        if not _NAME_RE.match(self.name):
            errors.append(f"partition name {self.name!r} must match {_NAME_RE.pattern}")
        if self.pkey == DEFAULT_PKEY:
            if self.name != "Default":
                errors.append("P_Key 0x7fff is reserved for the Default partition")
        elif not MIN_PKEY <= self.pkey <= MAX_PKEY:
            errors.append(f"P_Key {self.pkey:#06x} outside 0x0001-0x7ffe")
        for flag, (low, high) in _INT_FLAGS.items():
            value = getattr(self, flag)
            if value is not None and not low <= value <= high:
                errors.append(f"{flag}={value} outside {low}-{high}")
        seen: set[int | str] = set()
        for member in self.members:
            if member.port in seen:
                errors.append(f"member {member.render()} listed twice")
            seen.add(member.port)
        return errors


# Isolation by default: every end port is a *limited* member of the Default partition, so two
# hosts reach each other only through a partition the console gave them both; the subnet
# manager's port (OpenSM makes it full whatever the file says) and the switches' management
# ports are full, so every host still reaches the SM and the SA. OpenSM applies a statement's
# port specifiers in order and a later one overrides an earlier one for the same port.
DEFAULT_PARTITION = Partition(
    name="Default",
    pkey=DEFAULT_PKEY,
    ipoib=True,
    members=(
        Member("ALL", Membership.LIMITED),
        Member("ALL_SWITCHES", Membership.FULL),
        Member("SELF", Membership.FULL),
    ),
)


def _header(p: Partition) -> str:
    parts = [f"{p.name}={p.pkey:#06x}"]
    if p.indx0:
        parts.append("indx0")
    if p.ipoib:
        parts.append("ipoib")
    for flag in ("mtu", "rate", "sl"):
        value = getattr(p, flag)
        if value is not None:
            parts.append(f"{flag}={value}")
    if p.defmember is not None:
        parts.append(f"defmember={p.defmember.value}")
    return ", ".join(parts)


def render_partitions(
    partitions: Iterable[Partition],
    *,
    include_default: bool = True,
    members_per_line: int = MEMBERS_PER_LINE,
) -> str:
    """Render ``partitions.conf`` deterministically (Default first, then by P_Key).

    ``include_default`` adds :data:`DEFAULT_PARTITION` (``Default=0x7fff, ipoib : ALL=limited,
    ALL_SWITCHES=full, SELF=full ;``) unless the caller supplies its own Default. Raises ValueError for partitions that could not lint clean.
    """
    chosen = list(partitions)
    if include_default and not any(p.pkey == DEFAULT_PKEY for p in chosen):
        chosen.append(DEFAULT_PARTITION)
    errors = [f"{p.name}: {e}" for p in chosen for e in p.validate()]
    for attr in ("pkey", "name"):
        values = [getattr(p, attr) for p in chosen]
        errors += [f"duplicate {attr} {v!r}" for v in sorted(set(values)) if values.count(v) > 1]
    if errors:
        raise ValueError("; ".join(errors))
    chosen.sort(key=lambda p: (p.pkey != DEFAULT_PKEY, p.pkey))
    lines = ["# Managed by the InfiniBand console; edits here are overwritten.", ""]
    for p in chosen:
        members = [m.render() for m in sorted(p.members, key=Member.sort_key)]
        header = _header(p)
        if len(members) <= members_per_line:
            lines.append(f"{header} : {', '.join(members)} ;".replace(":  ;", ": ;"))
            continue
        lines.append(f"{header} :")
        chunks = [members[i : i + members_per_line] for i in range(0, len(members), members_per_line)]
        for i, chunk in enumerate(chunks):
            end = " ;" if i == len(chunks) - 1 else ","
            lines.append(f"    {', '.join(chunk)}{end}")
    text = "\n".join(lines) + "\n"
    # Names are capped at 64 characters and chunks at a few hundred, so this cannot trip; it is
    # here so that a future change to the limits fails loudly rather than writing a cut line.
    assert all(len(line) <= OPENSM_MAX_LINE for line in lines)
    return text


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


@dataclass
class ParsedMember:
    """A port specifier as written, with where it was written."""

    port_text: str
    flag_text: str | None
    line: int


@dataclass
class ParsedStatement:
    """One ``definition : ports ;`` statement as written."""

    line: int
    name: str
    pkey_text: str | None
    flags: list[tuple[str, str | None]]
    members: list[ParsedMember] = field(default_factory=list)
    terminated: bool = False
    end_line: int = 0


@dataclass
class ParsedPartitions:
    """The result of :func:`parse_partitions_conf`: statements plus syntax problems."""

    statements: list[ParsedStatement]
    problems: list[LintProblem]


def _split_token(token: str) -> tuple[str, str | None]:
    name, sep, value = token.partition("=")
    return name.strip(), (value.strip() if sep else None)


def parse_partitions_conf(text: str) -> ParsedPartitions:
    """Tokenise ``partitions.conf`` the way OpenSM does, keeping line numbers.

    Only syntax problems are reported here; :func:`lint_partitions` adds the semantic ones.
    """
    statements: list[ParsedStatement] = []
    problems: list[LintProblem] = []
    current: ParsedStatement | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        rest = raw.split("#", 1)[0]
        while rest.strip():
            body, semi, rest = rest.partition(";")
            if current is None:
                if not body.strip():
                    problems.append(LintProblem(ARTEFACT, lineno, "empty-statement", "stray ';'"))
                    continue
                head, colon, body = body.partition(":")
                if not colon:
                    problems.append(
                        LintProblem(
                            ARTEFACT,
                            lineno,
                            "syntax",
                            f"no partition definition (missing ':') in {head.strip()!r}",
                        )
                    )
                    if not semi:
                        break
                    continue
                head_items = head.split(",")
                name, pkey_text = _split_token(head_items[0])
                flags = [_split_token(item) for item in head_items[1:]]
                current = ParsedStatement(lineno, name, pkey_text, flags)
                statements.append(current)
            for item in body.split(","):
                port_text, flag_text = _split_token(item)
                if port_text or flag_text is not None:
                    current.members.append(ParsedMember(port_text, flag_text, lineno))
            if semi:
                current.terminated = True
                current.end_line = lineno
                current = None
            else:
                break
    if current is not None:
        current.end_line = current.line
        problems.append(
            LintProblem(
                ARTEFACT,
                current.line,
                "unterminated",
                f"partition {current.name!r} is not terminated by ';'",
            )
        )
    return ParsedPartitions(statements, problems)


def _parse_pkey(text: str | None) -> int | None:
    if text is None or not re.fullmatch(r"0x[0-9a-fA-F]{1,4}", text.strip()):
        return None
    return int(text, 16)


def _statement_problems(st: ParsedStatement) -> list[LintProblem]:
    problems: list[LintProblem] = []

    def bad(code: str, message: str, line: int | None = None) -> None:
        problems.append(LintProblem(ARTEFACT, line or st.line, code, message))

    if not _NAME_RE.match(st.name):
        bad("bad-name", f"partition name {st.name!r} must match {_NAME_RE.pattern}")
    pkey = _parse_pkey(st.pkey_text)
    if st.pkey_text is None:
        bad("missing-pkey", f"partition {st.name!r} has no P_Key (OpenSM would invent one)")
    elif pkey is None:
        bad("bad-pkey", f"malformed P_Key {st.pkey_text!r} (expected 0x0001-0x7ffe)")
    elif pkey == DEFAULT_PKEY:
        if st.name != "Default":
            bad("bad-pkey", "P_Key 0x7fff is reserved for the Default partition")
    elif not MIN_PKEY <= pkey <= MAX_PKEY:
        bad("pkey-range", f"P_Key {st.pkey_text} outside 0x0001-0x7ffe")
    for flag, value in st.flags:
        if flag == "ipoib" and value is None or flag == "indx0" and value is None:
            continue
        if flag == "defmember":
            if value not in {m.value for m in Membership}:
                bad("bad-membership", f"defmember={value!r}: expected full, limited or both")
        elif flag in _INT_FLAGS:
            low, high = _INT_FLAGS[flag]
            if value is None or not value.isdigit() or not low <= int(value) <= high:
                bad("bad-flag", f"{flag}={value!r}: expected an integer {low}-{high}")
        else:
            bad("unknown-flag", f"unknown partition flag {flag!r} (OpenSM ignores it)")
    seen: dict[str | int, int] = {}
    for m in st.members:
        if m.port_text == "mgid":
            bad("unsupported", "multicast group (mgid=) lines are not managed here", m.line)
            continue
        port: str | int | None
        if m.port_text in PORT_KEYWORDS:
            port = m.port_text
        else:
            port = parse_guid(m.port_text)
            if port is None:
                bad("bad-guid", f"malformed port GUID or keyword {m.port_text!r}", m.line)
                continue
        if m.flag_text is not None and m.flag_text not in {x.value for x in Membership}:
            bad(
                "bad-membership",
                f"unknown membership {m.flag_text!r} for {m.port_text} (OpenSM would silently make it limited)",
                m.line,
            )
        if port in seen:
            bad("duplicate-member", f"{m.port_text} already listed on line {seen[port]}", m.line)
        seen[port] = m.line
    return problems


def lint_partitions(text: str, *, require_default: bool = True) -> list[LintProblem]:
    """Every reason ``text`` must not reach OpenSM, with line numbers; empty means clean."""
    problems = control_char_problems(ARTEFACT, text) + long_line_problems(ARTEFACT, text)
    parsed = parse_partitions_conf(text)
    problems += parsed.problems
    pkeys: dict[int, int] = {}
    names: dict[str, int] = {}
    for st in parsed.statements:
        problems += _statement_problems(st)
        pkey = _parse_pkey(st.pkey_text)
        if pkey is not None:
            if pkey in pkeys:
                problems.append(
                    LintProblem(
                        ARTEFACT,
                        st.line,
                        "duplicate-pkey",
                        f"P_Key {pkey:#06x} already defined on line {pkeys[pkey]} (OpenSM would silently merge them)",
                    )
                )
            else:
                pkeys[pkey] = st.line
        if st.name in names:
            problems.append(
                LintProblem(
                    ARTEFACT,
                    st.line,
                    "duplicate-name",
                    f"partition name {st.name!r} already used on line {names[st.name]}",
                )
            )
        else:
            names.setdefault(st.name, st.line)
    if require_default and DEFAULT_PKEY not in pkeys:
        problems.append(
            LintProblem(
                ARTEFACT,
                None,
                "missing-default",
                "no Default=0x7fff rule (OpenSM would make every port a limited member)",
            )
        )
    return sorted(problems, key=lambda p: (p.line or 0, p.code))


def parse_partitions(text: str, *, require_default: bool = True) -> list[Partition]:
    """Parse a lint-clean ``partitions.conf`` into :class:`Partition` objects (file order).

    Raises :class:`~console.fabric.opensm.lint.ArtefactRejected` when the text is not clean,
    because a half-understood file is worse than none.
    """
    problems = lint_partitions(text, require_default=require_default)
    if problems:
        raise ArtefactRejected(problems)
    out = []
    for st in parse_partitions_conf(text).statements:
        flags = dict(st.flags)
        mtu, rate, sl, defmember = (flags.get(key) for key in ("mtu", "rate", "sl", "defmember"))
        members = []
        for m in st.members:
            port: int | str = m.port_text if m.port_text in PORT_KEYWORDS else 0
            if port == 0:
                port = parse_guid(m.port_text) or 0
            members.append(Member(port, Membership(m.flag_text) if m.flag_text else None))
        out.append(
            Partition(
                name=st.name,
                pkey=_parse_pkey(st.pkey_text) or 0,
                ipoib="ipoib" in flags,
                mtu=int(mtu) if mtu else None,
                rate=int(rate) if rate else None,
                sl=int(sl) if sl else None,
                defmember=Membership(defmember) if defmember else None,
                members=tuple(members),
                indx0="indx0" in flags,
            )
        )
    return out
