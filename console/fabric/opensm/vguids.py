"""Virtual port GUIDs (SR-IOV virtual functions): the console's vGUID space and each reservation's range.

A pod's InfiniBand VF has a port GUID that no inventory knows: ib-kubernetes picks it from a pool
(``GUID_POOL_RANGE_START``/``GUID_POOL_RANGE_END``) and asks the subnet manager to add it to the
P_Key. So that the console can tell whose a virtual GUID is, it gives every reservation its own
range and the reservation's ib-kubernetes is configured with that range as its pool:

    GUID = prefix (32 bits, console-wide) | reservation id (20 bits) | VF number (12 bits)

The prefix defaults to ``02:c0:ff:ee`` (the locally administered bit of an EUI-64 set, like
ib-kubernetes's default pool ``02:00:…``); reservation ids are unique console-wide, so ranges never
overlap across reservations or fabrics. A GUID is *virtual* when its top 32 bits are the prefix.
Plain functions, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The console-wide prefix unless ``CONSOLE_VGUID_PREFIX`` says otherwise.
DEFAULT_PREFIX = 0x02C0FFEE
RESERVATION_BITS = 20
VF_BITS = 12
#: GUIDs in each reservation's range.
RANGE_SIZE = 1 << VF_BITS


def parse_prefix(text: str) -> int:
    """``02:c0:ff:ee``, ``0x02c0ffee`` or ``02c0ffee`` → the 32-bit prefix."""
    digits = text.strip().lower().removeprefix("0x").replace(":", "").replace("-", "")
    if len(digits) != 8 or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError(f"vGUID prefix {text!r} must be 4 bytes (8 hex digits)")
    value = int(digits, 16)
    if value == 0:
        raise ValueError("vGUID prefix 0 would collide with real port GUIDs")
    return value


def is_virtual(guid: int, prefix: int) -> bool:
    """True when ``guid`` is in the console's vGUID space (any reservation's range)."""
    return guid >> 32 == prefix


@dataclass(frozen=True)
class VguidRange:
    """The virtual GUIDs one reservation owns: ``first``..``last`` inclusive."""

    first: int
    last: int

    def __contains__(self, guid: object) -> bool:
        return isinstance(guid, int) and self.first <= guid <= self.last

    @staticmethod
    def colon(guid: int) -> str:
        """``02:C0:FF:EE:00:00:70:00``: how ib-kubernetes's configuration spells a pool bound."""
        text = f"{guid:016X}"
        return ":".join(text[i : i + 2] for i in range(0, 16, 2))

    @property
    def start(self) -> str:
        return self.colon(self.first)

    @property
    def end(self) -> str:
        return self.colon(self.last)


def reservation_range(prefix: int, reservation_id: int) -> VguidRange | None:
    """The range of ``reservation_id`` (None past 2**20 reservations: the space is exhausted)."""
    if not 0 < reservation_id < 1 << RESERVATION_BITS:
        return None
    first = prefix << 32 | reservation_id << VF_BITS
    return VguidRange(first, first + RANGE_SIZE - 1)


def owner_of(guid: int, prefix: int) -> int | None:
    """The reservation id whose range holds ``guid`` (None for a GUID outside the space)."""
    if not is_virtual(guid, prefix):
        return None
    return (guid >> VF_BITS) & ((1 << RESERVATION_BITS) - 1) or None
