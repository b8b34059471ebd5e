"""Every row lock the fabric's change services take, in one place and one order.

The fabric row serialises a fabric's desired state and its pushes: creating a change, setting a
manual partition or a port's wanted state, and taking a change's lease all lock it first. A
service that locks a change row too takes it after the fabric row, never before, so two writers
never wait on each other in opposite orders. Services lock through this module instead of each
spelling its own ``select_for_update``."""

from __future__ import annotations

from console.fabric.models import ChangeRequest, Fabric, FabricPartition, PortAdminState


def fabric_for_update(pk: int) -> Fabric:
    """Lock and return the fabric row (taken before any change row of the fabric)."""
    return Fabric.objects.select_for_update().get(pk=pk)


def change_for_update(pk: int) -> ChangeRequest:
    """Lock and return one change row."""
    return ChangeRequest.objects.select_for_update().get(pk=pk)


def partition_for_update(fabric: Fabric, name: str) -> FabricPartition | None:
    """Lock and return the fabric's manual partition called ``name`` (None when there is none)."""
    return FabricPartition.objects.select_for_update().filter(fabric=fabric, name=name).first()


def port_admin_for_update(fabric: Fabric, switch: str, port: int) -> PortAdminState | None:
    """Lock and return the wanted state of one switch port (None when none is recorded)."""
    return PortAdminState.objects.select_for_update().filter(fabric=fabric, switch=switch, port=port).first()
