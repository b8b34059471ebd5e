"""``partitions.conf`` as OpenSM 3.3 itself reads it: for files the console did not write.

The console's own renderer and linter (:mod:`.partitions`) accept only the canonical subset it
writes. An operator's file may use everything OpenSM accepts: multicast groups (``mgid=``) and
their flags, decimal or octal GUIDs (``strtoull(…, 0)``), keywords and memberships abbreviated
to any prefix (``AL``, ``f``), a P_Key repeated to split one partition over several statements
(OpenSM merges them), names left out. This module reads such a file the way
``osm_prtn_config.c`` does, so that the console can keep an operator's partitions exactly as
written and still know who is a member of what (for the isolation rule).

It reports as problems only what makes OpenSM drop the whole file (which leaves every port a
full member of the Default partition): a statement with no ``:`` on its first line, a P_Key
that does not parse, a port GUID that does not parse or is 0, lines OpenSM would cut, control
characters, and a file with no statement at all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from console.fabric.opensm.lint import LintProblem, control_char_problems, long_line_problems
from console.fabric.opensm.partitions import ARTEFACT, DEFAULT_PKEY, Member, Membership, Partition

# The lines around the partitions the console keeps as written (console.fabric.opensm.partitions_file).
BEGIN = "# BEGIN operator-owned partitions: found on this SM host, kept exactly as written"
END = "# END operator-owned partitions"
_KEYWORDS = ("ALL", "ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF")  # OpenSM's order of tests
_GROUP_FLAGS = ("mtu", "rate", "scope", "Q_Key", "TClass", "sl", "FlowLabel")


@dataclass(frozen=True)
class LiveStatement:
    """One statement as OpenSM reads it, with its exact text (``start``/``end``: offsets)."""

    name: str
    pkey: int | None  # None: no P_Key written (OpenSM invents one)
    line: int
    start: int
    end: int
    members: tuple[tuple[int | str, Membership], ...] = ()
    ipoib: bool = False
    indx0: bool = False
    has_mgid: bool = False


@dataclass
class LiveFile:
    """The statements of a live ``partitions.conf`` and what would make OpenSM drop it."""

    text: str
    statements: list[LiveStatement] = field(default_factory=list)
    problems: list[LintProblem] = field(default_factory=list)

    def raw(self, statement: LiveStatement) -> str:
        """The statement's text as written, with the comment lines right above it."""
        start = self.text.rfind("\n", 0, statement.start) + 1
        if self.text[start : statement.start].strip():
            start = statement.start  # another statement ends on the same line: from ours only
        lines = self.text[:start].split("\n")[:-1]
        lead: list[str] = []
        while lines and lines[-1].lstrip().startswith("#") and lines[-1] not in (BEGIN, END):
            lead.insert(0, lines.pop())
        end = self.text.find("\n", statement.end)
        tail = self.text[statement.end + 1 : end if end >= 0 else len(self.text)]
        body = self.text[start : statement.end + 1]
        if tail.lstrip().startswith("#"):
            body += tail  # its trailing comment
        return "\n".join([*lead, body]).strip("\n") + "\n"


def _strtoull(text: str) -> int | None:
    """C's ``strtoull(text, &end, 0)`` that must consume everything: 0x hex, 0 octal, decimal."""
    text = text.strip()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    if re.fullmatch(r"0[0-7]*", text):
        return int(text, 8) if len(text) > 1 else 0
    if re.fullmatch(r"[1-9][0-9]*", text):
        return int(text)
    return None


def _prefix_of(word: str, full: str) -> bool:
    """OpenSM's ``!strncmp(word, full, strlen(word))``: an empty word matches anything."""
    return full.startswith(word)


def _membership(flag: str | None, default: Membership) -> Membership:
    if flag is None:
        return default
    flag = flag.strip()
    if _prefix_of(flag, "full"):
        return Membership.FULL
    if _prefix_of(flag, "both"):
        return Membership.BOTH
    return Membership.LIMITED  # "limited", a prefix of it, or anything else (OpenSM warns)


def _port(name: str) -> int | str | None:
    """A keyword (full spelling), a GUID, ``""`` for NONE/empty, or None when OpenSM fails."""
    if not name or _prefix_of(name, "NONE"):
        return ""
    for keyword in _KEYWORDS:
        if _prefix_of(name, keyword):
            return keyword
    guid = _strtoull(name)
    return guid if guid else None


def _token(text: str) -> tuple[str, str | None]:
    name, sep, value = text.partition("=")
    return name.strip(), (value.strip() if sep else None)


@dataclass
class _Open:
    name: str
    pkey: int | None
    line: int
    start: int
    defmember: Membership
    ipoib: bool
    indx0: bool
    members: list[tuple[int | str, Membership]] = field(default_factory=list)
    has_mgid: bool = False


def read_live(text: str) -> LiveFile:
    """Read ``text`` as OpenSM does (see the module's docstring)."""
    out = LiveFile(text, problems=control_char_problems(ARTEFACT, text) + long_line_problems(ARTEFACT, text))
    current: _Open | None = None
    offset = 0
    for lineno, raw in enumerate(text.split("\n"), start=1):
        body = raw.split("#", 1)[0]
        pos = 0
        while True:
            while pos < len(body) and body[pos] in " \t":
                pos += 1
            if pos >= len(body):
                break
            semi = body.find(";", pos)
            segment = body[pos : semi if semi >= 0 else len(body)]
            if current is None:
                head, colon, rest = segment.partition(":")
                if not colon:
                    out.problems.append(
                        LintProblem(ARTEFACT, lineno, "syntax", "no partition definition (':') on this line")
                    )
                    return out
                current = _header(head, lineno, offset + pos, out)
                if current is None:
                    return out
                segment = rest
            if not _ports(segment, current, lineno, out):
                return out
            if semi < 0:
                break
            out.statements.append(_close(current, offset + semi))
            current = None
            pos = semi + 1
        offset += len(raw) + 1
    if current is not None:
        out.problems.append(LintProblem(ARTEFACT, current.line, "unterminated", f"{current.name!r} has no ';'"))
    if not out.statements and not out.problems:
        out.problems.append(LintProblem(ARTEFACT, None, "empty", "no partition statement (OpenSM drops the file)"))
    return out


def _header(head: str, lineno: int, start: int, out: LiveFile) -> _Open | None:
    items = head.split(",")
    name, pkey_text = _token(items[0])
    if pkey_text is None and name[:1].isdigit():
        name, pkey_text = "", name
    pkey: int | None = None
    if pkey_text is not None:
        value = _strtoull(pkey_text) if pkey_text else None
        if value is None:
            out.problems.append(LintProblem(ARTEFACT, lineno, "bad-pkey", f"P_Key {pkey_text!r} does not parse"))
            return None
        pkey = (value & 0x7FFF) or None  # OpenSM casts to 16 bits and drops the membership bit
    current = _Open(name, pkey, lineno, start, Membership.LIMITED, False, False)
    for item in items[1:]:
        flag, flag_value = _token(item)
        if any(_prefix_of(flag, group) for group in _GROUP_FLAGS):
            continue  # a multicast group flag of the IPoIB broadcast group
        if _prefix_of(flag, "ipoib"):
            current.ipoib = True
        elif _prefix_of(flag, "defmember"):
            if flag_value is not None and any(_prefix_of(flag_value, m) for m in ("limited", "both", "full")):
                current.defmember = _membership(flag_value, current.defmember)
        elif flag == "indx0":
            current.indx0 = True
    return current


def _ports(segment: str, current: _Open, lineno: int, out: LiveFile) -> bool:
    for item in segment.split(","):
        name, flag = _token(item)
        if name == "mgid":
            current.has_mgid = True
            return True  # OpenSM: the multicast group consumes the rest of the line
        port = _port(name)
        if port is None:
            out.problems.append(LintProblem(ARTEFACT, lineno, "bad-guid", f"port {name!r} is not a GUID OpenSM reads"))
            return False
        if port != "":
            current.members.append((port, _membership(flag, current.defmember)))
    return True


def _close(current: _Open, end: int) -> LiveStatement:
    return LiveStatement(
        current.name,
        current.pkey,
        current.line,
        current.start,
        end,
        tuple(current.members),
        current.ipoib,
        current.indx0,
        current.has_mgid,
    )


def as_partitions(statements: list[LiveStatement]) -> list[Partition]:
    """The statements as :class:`Partition` objects for the isolation rule, one per P_Key
    (statements sharing a P_Key merged, as OpenSM merges them; no P_Key: skipped)."""
    merged: dict[int, tuple[str, list[Member]]] = {}
    for st in statements:
        if st.pkey is None:
            continue
        name, members = merged.setdefault(st.pkey, (st.name or f"pkey-{st.pkey:04x}", []))
        members.extend(Member(port, membership) for port, membership in st.members)
    return [
        Partition("Default" if pkey == DEFAULT_PKEY else name, pkey, members=_in_render_order(members))
        for pkey, (name, members) in sorted(merged.items())
    ]


# What a keyword written later overrides of what was written before it.
_COVERS = {
    "ALL": {"ALL_CAS", "ALL_SWITCHES", "ALL_ROUTERS", "SELF", "guid"},
    "ALL_CAS": {"guid", "SELF"},  # port GUIDs in partitions are taken to be CA ports, as SELF is
    "ALL_SWITCHES": set(),
    "ALL_ROUTERS": set(),
    "SELF": set(),
}


def _in_render_order(members: list[Member]) -> tuple[Member, ...]:
    """The members as written (a later specifier overriding an earlier one) restated so that the
    console's order (keywords first, then GUIDs: :meth:`Member.sort_key`) means the same."""
    kept: list[Member] = []
    for m in members:
        if isinstance(m.port, str):
            covered = _COVERS[m.port]
            kept = [
                k
                for k in kept
                if k.port != m.port and not (isinstance(k.port, int) and "guid" in covered) and k.port not in covered
            ]
        else:
            kept = [k for k in kept if k.port != m.port]
        kept.append(m)
    return tuple(sorted(kept, key=Member.sort_key))
