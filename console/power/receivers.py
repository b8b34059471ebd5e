"""Power management's side of the scheduling seam, connected in :meth:`PowerConfig.ready`.

- scheduling's ``power_wanted`` (a granted reservation needs nodes that are off, at its grant or
  as its start comes within their boot time) boots those nodes through their BMCs;
- this app's ``power_state_changed`` to ``on`` tells scheduling, which reconciles the fabric for
  reservations that were waiting for the node and runs a queue pass for its pools; to ``off`` or
  ``failed``, scheduling reconciles the node's fabric (its ports are down) and boots it again at
  once if a reservation waiting on it starts soon (it was powering off when placement took it).
"""

from __future__ import annotations

from typing import Any

from console.power import services
from console.power.signals import power_state_changed
from scheduling.models import Node
from scheduling.services import power as scheduling_power

DISPATCH_WANTED = "console.power.wake_for_reservations"
DISPATCH_CHANGED = "console.power.tell_scheduling"


def wake_for_reservations(*, node_ids: list[int], reservation_ids: list[int], reason: str, **_: Any) -> None:
    """Boot the off nodes that reservations ``reservation_ids`` need."""
    ids = ", ".join(str(r) for r in reservation_ids)
    services.wake(list(node_ids), reason=f"reservation {ids} needs it ({reason})", reservation_ids=reservation_ids)


def tell_scheduling(*, node_id: int, state: str, **_: Any) -> None:
    """A node came on: reservations waiting for it may go to the fabric, queued requests may start.
    A node went off (or failed): its fabric converges without its ports."""
    if state == Node.Power.ON:
        scheduling_power.powered_on(node_id)
    elif state in (Node.Power.OFF, Node.Power.FAILED):
        scheduling_power.powered_off(node_id)


def connect() -> None:
    """Connect both receivers (idempotent: by dispatch uid)."""
    scheduling_power.power_wanted.connect(wake_for_reservations, dispatch_uid=DISPATCH_WANTED)
    power_state_changed.connect(tell_scheduling, dispatch_uid=DISPATCH_CHANGED)
