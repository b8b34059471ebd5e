"""Nodes that lost their path on the fabric (issue 35): telemetry marks a node when one of its
host links goes down (a pulled cable, a port the health policy isolated) and clears it when every
link is back.

A marked node (``Node.path_lost``, the reason in words) takes no new placement: an available node
is set draining, and set available again when its path is back (a node an operator drained or
took down keeps the state the operator gave it). The reservations running on it heard of the
fault from its ``reservation.fabric_fault`` notice; the Slurm mirror drains the node with the
reason (``ibconsole: …``) and resumes it when it is back. Audited.
"""

from __future__ import annotations

from django.db import transaction

from console.tenancy import audit
from console.tenancy.context import Actor
from scheduling.models import Node, Pool
from scheduling.services.locks import node_for_update
from scheduling.services.publish import enqueue_queue_pass, enqueue_slurm_sync

#: How the console's reasons start (in Slurm too: the mirror resumes only the nodes it drained).
PREFIX = "ibconsole: "


def mark(actor: Actor, node_id: int, why: str) -> bool:
    """Mark the node cut off (``why``, in words); False when it already was, for that reason."""
    reason = (PREFIX + why)[:200]
    with transaction.atomic():
        node = node_for_update(node_id)
        if node.path_lost == reason:
            return False
        before = audit.snapshot(node)
        node.path_lost = reason
        if node.state == Node.State.AVAILABLE:
            node.state = Node.State.DRAINING
        node.save(update_fields=["path_lost", "state"])
        audit.record(actor, "node.path_lost", node, before=before, after=audit.snapshot(node))
        enqueue_slurm_sync()
    return True


def clear(actor: Actor, node_id: int) -> bool:
    """The node's path is back; False when it was not marked."""
    with transaction.atomic():
        node = node_for_update(node_id)
        if not node.path_lost:
            return False
        before = audit.snapshot(node)
        node.path_lost = ""
        if node.state == Node.State.DRAINING:
            node.state = Node.State.AVAILABLE
            enqueue_queue_pass(Pool.nodes.through.objects.filter(node_id=node.pk).values_list("pool_id", flat=True))
        node.save(update_fields=["path_lost", "state"])
        audit.record(actor, "node.path_back", node, before=before, after=audit.snapshot(node))
        enqueue_slurm_sync()
    return True
