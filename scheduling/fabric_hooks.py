"""Scheduling's side of the fabric's hooks (:mod:`console.fabric.hooks`).

The fabric layer knows partitions, not reservations. Scheduling registers, in
:meth:`scheduling.apps.SchedulingConfig.ready` (every process runs it), a partitions provider that
answers which partitions live reservations need and a change listener that moves reservations when
a change is verified on the wire or fails. It reaches the fabric the other way only through
:mod:`console.fabric.services` (P_Key allocation, the reconcile enqueue).
"""

from __future__ import annotations

from console.fabric import hooks
from console.fabric.hooks import PartitionRequest
from scheduling.services.lifecycle import desired_partitions, fabric_failed, fabric_verified

#: The name scheduling registers its provider and listener under.
HOOK_NAME = "scheduling"


def desired_reservation_partitions(fabric_id: int) -> list[PartitionRequest]:
    """Partitions the fabric must carry for live reservations (placed, provisioning, ready).

    Reservations winding down (ending, cancelled, preempted) are left out so the next change
    removes them; their P_Keys stay reserved until :func:`on_fabric_verified` sees them gone.
    """
    return desired_partitions(fabric_id)


def on_fabric_verified(fabric_id: int, *, present_pkeys: set[int], change_id: int) -> None:
    """A change was verified on the fabric: these P_Keys are on their member ports. Reservations
    provisioning with a P_Key in ``present_pkeys`` become ready; releasing ones whose P_Key is no
    longer present become released."""
    fabric_verified(fabric_id, set(present_pkeys), change_id)


def on_fabric_failed(fabric_id: int, *, change_id: int, error: str) -> None:
    """A change failed or was rolled back; reservations waiting on it stay provisioning and the
    failure is recorded so tenants see why."""
    fabric_failed(fabric_id, change_id, error)


def register() -> None:
    """Register scheduling's provider and listener with the fabric (idempotent: by name)."""
    hooks.register_partitions_provider(HOOK_NAME, desired_reservation_partitions)
    hooks.register_change_listener(
        HOOK_NAME, hooks.ChangeListener(on_verified=on_fabric_verified, on_failed=on_fabric_failed)
    )
