"""What a search box query means, before any lookup: plain typed Python, no Django.

An operator pastes what an ``ibdiagnet`` report, ``ibstat`` or a colleague gave them:

- a GUID in any common spelling: ``0x0002c90300a1b2c3``, ``0002c90300a1b2c3``, ``00:02:c9:03:00:a1:b2:c3``,
  any case (more than 4 hex digits, or colons);
- a LID: ``lid:123`` (also ``lid 123``, ``LID=0x7b``), or a bare number of up to 5 digits (then also a
  reservation id; longer digit strings are read as GUIDs and reservation ids);
- a P_Key: ``0x8a11`` or ``0x0a11`` — the full-membership bit (0x8000) is ignored, both mean 0x0a11;
- a cable end: ``leaf-su1-1[12]`` is port 12 of switch ``leaf-su1-1``;
- anything else is a name (switch, node, reservation, design, tenant), matched case-insensitively.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_QUERY = 200
PKEY_MASK = 0x7FFF
# ASCII digits only: \d is any Unicode digit, and int() refuses some of them ("²")
_LID = re.compile(r"^lid\s*[:= ]\s*(0x[0-9a-f]+|[0-9]+)$")
_CABLE = re.compile(r"^([A-Za-z0-9_.\-/]+)\s*\[\s*([0-9]{1,4})\s*\]$")
_DIGITS = re.compile(r"^[0-9]+$")
_HEX = re.compile(r"^[0-9a-f]+$")
_COLON_GUID = re.compile(r"^[0-9a-f]{1,4}(:[0-9a-f]{1,4})+$")


@dataclass(frozen=True)
class SearchQuery:
    """One query, read every way it can be read (several fields may be set at once)."""

    text: str  # the trimmed query, for name matching
    guid: int | None = None
    lid: int | None = None
    explicit_lid: bool = False  # ``lid:N`` (a bare number is also a reservation id)
    pkey: int | None = None  # without the membership bit
    cable: tuple[str, int] | None = None  # (switch, port)
    number: int | None = None  # a bare decimal number: a reservation id (and a LID)

    @property
    def empty(self) -> bool:
        return not self.text


def format_guid(value: int) -> str:
    """The spelling the console stores: ``0x`` and 16 lower-case hex digits."""
    return f"{value:#018x}"


def parse_guid(text: str) -> int | None:
    """A GUID from any common spelling, or None when ``text`` is not one."""
    s = text.strip().lower()
    if _COLON_GUID.match(s):
        groups = s.split(":")
        # 00:02:c9:... (bytes) or 0002:c903:... (16-bit groups): pad each group to its width.
        width = max(len(g) for g in groups)
        width = 2 if width <= 2 else 4
        digits = "".join(g.rjust(width, "0") for g in groups)
    else:
        digits = s[2:] if s.startswith("0x") else s
        if not _HEX.match(digits) or len(digits) <= 4:
            return None
    if not digits or len(digits) > 16:
        return None
    return int(digits, 16)


def parse(raw: str) -> SearchQuery:
    """Read ``raw`` as every kind of identifier it could be."""
    text = " ".join(raw.split())[:MAX_QUERY]
    if not text:
        return SearchQuery(text="")
    low = text.lower()
    m = _LID.match(low)
    if m:
        lid = int(m.group(1), 0)
        return SearchQuery(text=text, lid=lid if 0 < lid < 0xC000 else None, explicit_lid=True)
    m = _CABLE.match(text)
    if m:
        return SearchQuery(text=text, cable=(m.group(1), int(m.group(2))))
    if _DIGITS.match(low):
        value = int(low)
        # Up to 5 digits is a LID (or a reservation id); longer is a GUID whose hex happens to be digits.
        bare_lid = value if 0 < value < 0xC000 and len(low) <= 5 else None
        return SearchQuery(text=text, lid=bare_lid, number=value, guid=parse_guid(low) if len(low) > 5 else None)
    if low.startswith("0x") and 3 <= len(low) <= 6 and _HEX.match(low[2:]):
        return SearchQuery(text=text, pkey=int(low, 16) & PKEY_MASK)
    return SearchQuery(text=text, guid=parse_guid(low))
