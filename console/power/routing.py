"""A node's BMC actions run at the node's site: ``power.drive`` and ``power.poll`` go to the queue
of the node's fabric's site (console/fabric/routing.py), connected in :meth:`PowerConfig.ready`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from console.fabric import routing
from console.power.services import DRIVE, POLL
from scheduling.models import Node


def node_fabric(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
    """The fabric of the node a power task acts on (its first argument, ``node_id``)."""
    node_id = routing.argument("node_id", 0)(args, kwargs)
    if node_id is None:
        return None
    return Node.objects.filter(pk=node_id).values_list("fabric_id", flat=True).first()


def connect() -> None:
    for name in (DRIVE, POLL):
        routing.register(name, node_fabric)
