"""The fabric layer's service API for the layers above it (scheduling).

A layer above allocates P_Keys from fabrics' ranges (the same value across subnets where it can), asks for a reconcile and, at start-up,
recovers the changes a crash left in flight through these functions; it tells the fabric which partitions it wants through :mod:`console.fabric.hooks`.
Nothing above the fabric imports its tasks or the Celery app.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings

from console.fabric.changes.recovery import ChangesRecovered, recover_changes
from console.fabric.enqueue import enqueue_reconcile, publish_reconcile
from console.fabric.opensm.vguids import VguidRange, parse_prefix, reservation_range
from console.tenancy.errors import Conflict

__all__ = [
    "ChangesRecovered",
    "KeySpace",
    "VguidRange",
    "allocate_pkeys",
    "vguid_prefix",
    "vguid_range",
    "enqueue_reconcile",
    "publish_reconcile",
    "recover_changes",
]


@dataclass(frozen=True, slots=True)
class KeySpace:
    """One fabric's P_Key range and the keys taken in it: the caller's live P_Keys (for
    reservations: every subnet row still live) and its partitions of other sources."""

    fabric_id: int
    name: str
    low: int
    high: int
    taken: frozenset[int]

    def free(self, pkey: int) -> bool:
        """``pkey`` is in the range and not taken."""
        return self.low <= pkey <= self.high and pkey not in self.taken


def allocate_pkeys(spaces: Sequence[KeySpace]) -> dict[int, int]:
    """A P_Key per fabric (by pk) for one owner that spans ``spaces``: the lowest value free on
    every fabric when there is one (one ``NCCL_IB_PKEY`` for all of its hosts, and the value an
    IB router between the subnets must carry: docs/operations.md), else the lowest free one of
    each fabric's own range. Raises :class:`Conflict` (``no_pkey``) naming an exhausted fabric.

    The caller guarantees uniqueness among its own rows (for reservations, a database
    constraint): a concurrent pick of the same key fails on insert and the caller retries.
    """
    low, high = max(s.low for s in spaces), min(s.high for s in spaces)
    common = next((k for k in range(low, high + 1) if all(s.free(k) for s in spaces)), None)
    if common is not None:
        return {s.fabric_id: common for s in spaces}
    picked: dict[int, int] = {}
    for space in spaces:
        key = next((k for k in range(space.low, space.high + 1) if space.free(k)), None)
        if key is None:
            raise Conflict(
                f"fabric {space.name} has no free P_Key in 0x{space.low:04x}..0x{space.high:04x}", code="no_pkey"
            )
        picked[space.fabric_id] = key
    return picked


def vguid_prefix() -> int:
    """The console-wide prefix of virtual port GUIDs (``CONSOLE_VGUID_PREFIX``)."""
    return parse_prefix(settings.VGUID_PREFIX)


def vguid_range(reservation_id: int) -> VguidRange | None:
    """The virtual GUIDs (pod VFs) reservation ``reservation_id`` owns (see opensm/vguids.py)."""
    return reservation_range(vguid_prefix(), reservation_id)
