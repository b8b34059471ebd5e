"""The fabric layer's service API for the layers above it (scheduling).

A layer above allocates P_Keys from a fabric's range, asks for a reconcile and, at start-up,
recovers the changes a crash left in flight through these functions; it tells the fabric which partitions it wants through :mod:`console.fabric.hooks`.
Nothing above the fabric imports its tasks or the Celery app.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings

from console.fabric.changes.recovery import ChangesRecovered, recover_changes
from console.fabric.enqueue import enqueue_reconcile, publish_reconcile
from console.fabric.models import Fabric, FabricPartition
from console.fabric.opensm.vguids import VguidRange, parse_prefix, reservation_range

__all__ = [
    "ChangesRecovered",
    "VguidRange",
    "allocate_pkey",
    "vguid_prefix",
    "vguid_range",
    "enqueue_reconcile",
    "publish_reconcile",
    "recover_changes",
]


def allocate_pkey(fabric: Fabric, *, held: Iterable[int], others: Iterable[int] | None = None) -> int | None:
    """The lowest P_Key of ``fabric``'s range that is neither in ``held`` (the caller's live
    P_Keys, e.g. reservations') nor used by a partition of another source (``others`` when the
    caller read them in its own query, else read here); None when the range is exhausted.

    The caller guarantees uniqueness among its own rows (for reservations, a database
    constraint): a concurrent pick of the same key fails on insert and the caller retries.
    """
    if others is None:
        others = (
            FabricPartition.objects.filter(fabric=fabric)
            .exclude(source=FabricPartition.Source.RESERVATION)
            .values_list("pkey", flat=True)
        )
    used = {*held, *others}
    for pkey in range(fabric.pkey_min, fabric.pkey_max + 1):
        if pkey not in used:
            return pkey
    return None


def vguid_prefix() -> int:
    """The console-wide prefix of virtual port GUIDs (``CONSOLE_VGUID_PREFIX``)."""
    return parse_prefix(settings.VGUID_PREFIX)


def vguid_range(reservation_id: int) -> VguidRange | None:
    """The virtual GUIDs (pod VFs) reservation ``reservation_id`` owns (see opensm/vguids.py)."""
    return reservation_range(vguid_prefix(), reservation_id)
