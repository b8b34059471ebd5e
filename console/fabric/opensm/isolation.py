"""Who can reach whom through a set of partitions: the isolation rule, as plain code.

Two end ports can talk in a partition when both are members and at least one of them is a
full member (two limited members cannot). So tenants are isolated exactly when no partition
has ports of two different tenants of which either is full; the Default partition included,
which is why the console makes every host a limited member of it and only the SM's port and
the switches' management ports full (:data:`~console.fabric.opensm.partitions.DEFAULT_PARTITION`).

Ownership comes from outside: ``owners`` maps a port GUID to the tenant that holds it
(``"tenant:<id>"``) or to another kind of holder (``"service:<name>"`` for storage or login
hosts, which may be full members of a partition whose tenant ports are limited). A port with
no owner is a free host or infrastructure. Keywords are expanded the way OpenSM does: ``ALL``
and ``ALL_CAS`` over every host port known (``hosts``), ``SELF`` to the SM's port, and a later
specifier overrides an earlier one for the same port (the renderer's order).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from console.fabric.opensm.lint import format_guid
from console.fabric.opensm.partitions import Member, Membership, Partition

TENANT = "tenant:"
SERVICE = "service:"


@dataclass(frozen=True)
class Leak:
    """Two ports of different tenants that can talk in one partition (``a`` is a full member)."""

    pkey: int
    partition: str
    a: int
    b: int
    owner_a: str
    owner_b: str

    def describe(self, names: Mapping[int, str] | None = None) -> str:
        """``P_Key 0x0042 (shared): tenant:1's su01-n01 HCA-1 (full) reaches tenant:2's …``."""
        names = names or {}

        def port(guid: int) -> str:
            name = names.get(guid)
            return f"{name} ({format_guid(guid)})" if name else format_guid(guid)

        return (
            f"P_Key {self.pkey:#06x} ({self.partition}): {self.owner_a}'s {port(self.a)} is a full member "
            f"and reaches {self.owner_b}'s {port(self.b)}"
        )

    def as_json(self, names: Mapping[int, str] | None = None) -> dict[str, object]:
        """The leak as the API and the audit store it."""
        names = names or {}
        return {
            "pkey": f"{self.pkey:#06x}",
            "partition": self.partition,
            "a": {"guid": format_guid(self.a), "owner": self.owner_a, "name": names.get(self.a, "")},
            "b": {"guid": format_guid(self.b), "owner": self.owner_b, "name": names.get(self.b, "")},
            "message": self.describe(names),
        }


def effective_members(
    partition: Partition, hosts: Collection[int], *, sm_guid: int | None = None
) -> dict[int, Membership]:
    """Port GUID → the membership OpenSM gives it in ``partition`` (``both`` counts as full:
    ``allow_both_pkeys`` is off); keywords expanded over ``hosts`` and the SM's port."""
    out: dict[int, Membership] = {}
    for m in sorted(partition.members, key=Member.sort_key):
        membership = partition.effective_membership(m)
        if membership is Membership.BOTH:
            membership = Membership.FULL
        if isinstance(m.port, int):
            out[m.port] = membership
        elif m.port in ("ALL", "ALL_CAS"):
            out.update(dict.fromkeys(hosts, membership))
        elif m.port == "SELF" and sm_guid is not None:
            out[sm_guid] = membership
    if sm_guid is not None and partition.name == "Default":
        out[sm_guid] = Membership.FULL  # OpenSM's own port is always full in the Default partition
    return out


def partition_leaks(
    partition: Partition, owners: Mapping[int, str], hosts: Collection[int], *, sm_guid: int | None = None
) -> list[Leak]:
    """One leak per ordered pair of tenants that can talk in ``partition`` (at most)."""
    full: dict[str, int] = {}
    any_port: dict[str, int] = {}
    for guid, membership in sorted(effective_members(partition, hosts, sm_guid=sm_guid).items()):
        owner = owners.get(guid, "")
        if not owner.startswith(TENANT):
            continue
        any_port.setdefault(owner, guid)
        if membership is Membership.FULL:
            full.setdefault(owner, guid)
    leaks = []
    for owner_a, a in sorted(full.items()):
        for owner_b, b in sorted(any_port.items()):
            if owner_b != owner_a and not (owner_b in full and owner_b < owner_a):
                leaks.append(Leak(partition.pkey, partition.name, a, b, owner_a, owner_b))
    return leaks


def leaks(
    partitions: Iterable[Partition],
    owners: Mapping[int, str],
    *,
    hosts: Collection[int] = (),
    sm_guid: int | None = None,
) -> list[Leak]:
    """Every pair of tenants that can talk through ``partitions`` (one leak per partition and
    pair). ``hosts``: the host ports ``ALL`` stands for (the owned ones are always included)."""
    every = set(hosts) | set(owners)
    return [leak for p in partitions for leak in partition_leaks(p, owners, every, sm_guid=sm_guid)]
