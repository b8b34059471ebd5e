"""The small named interface between scheduling and fabric operations.

Fabric operations (console.fabric) calls these to learn which partitions reservations need and
to report what it verified on the wire; scheduling enqueues the Celery task named
``fabric.reconcile`` (kwargs: ``fabric_id``) after a reservation commits. Neither side imports the
other's internals.
"""

from __future__ import annotations

from typing import TypedDict


class ReservationPartition(TypedDict):
    reservation_id: int
    tenant_id: int
    name: str  # e.g. "res-42"
    pkey: int  # 0x0001..0x7ffe, from the fabric's range, never reused while live
    sl: int  # the priority class's service level
    members: list[list[str]]  # [["0x0002c90300000101", "full"], …] HCA port GUIDs


def desired_reservation_partitions(fabric_id: int) -> list[ReservationPartition]:
    """Partitions the fabric must carry for live reservations (placed, provisioning, ready).

    Reservations winding down (ending, cancelled, preempted) are left out so the next change
    removes them; their P_Keys stay reserved until :func:`on_fabric_verified` sees them gone.
    """
    from scheduling.services.lifecycle import desired_partitions

    return desired_partitions(fabric_id)  # type: ignore[return-value]


def on_fabric_verified(fabric_id: int, *, present_pkeys: set[int], change_id: int) -> None:
    """A change was verified on the fabric: these P_Keys are on their member ports. Reservations
    provisioning with a P_Key in ``present_pkeys`` become ready; releasing ones whose P_Key is no
    longer present become released."""
    from scheduling.services.lifecycle import fabric_verified

    fabric_verified(fabric_id, set(present_pkeys), change_id)


def on_fabric_failed(fabric_id: int, *, change_id: int, error: str) -> None:
    """A change failed or was rolled back; reservations waiting on it stay provisioning and the
    failure is recorded so tenants see why."""
    from scheduling.services.lifecycle import fabric_failed

    fabric_failed(fabric_id, change_id, error)
