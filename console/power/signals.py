"""The one signal of power management: a node's power state changed (sent after commit).

Receivers get ``node_id`` and ``state`` (a ``scheduling.models.Node.Power`` value); the scheduling
side listens for reservations waiting on a node that boots."""

from django.dispatch import Signal

power_state_changed = Signal()  # kwargs: node_id: int, state: str
