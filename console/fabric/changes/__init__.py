"""Fabric change requests: desired state, diff, approval, the push pipeline (plain services)."""

from console.fabric.changes.partitions import (
    create_fabric,
    delete_fabric,
    delete_partition,
    service_access,
    set_operator_partition,
    set_partition,
    update_fabric,
)
from console.fabric.changes.pipeline import apply_change, reap_stuck_changes
from console.fabric.changes.ports import clear_port_admin, set_port_admin
from console.fabric.changes.requests import approve, cancel, reconcile, request_change

__all__ = [
    "apply_change",
    "approve",
    "cancel",
    "clear_port_admin",
    "create_fabric",
    "delete_fabric",
    "delete_partition",
    "reap_stuck_changes",
    "reconcile",
    "request_change",
    "service_access",
    "set_operator_partition",
    "set_port_admin",
    "set_partition",
    "update_fabric",
]
