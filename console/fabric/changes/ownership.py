"""Who holds which port of a fabric, as the isolation rule needs it, and the rule applied to
desired state (:mod:`console.fabric.opensm.isolation`).

Owners come from the desired state itself: a reservation's partition carries its tenant, a
service partition's full members are its service hosts. Names come from the fabric's design
(``su01-n03 HCA-1``), so a refusal or an alarm names hosts, not GUIDs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from console.fabric.models import Fabric
from console.fabric.opensm.isolation import SERVICE, TENANT, Leak, leaks
from console.fabric.opensm.lint import parse_guid
from console.fabric.opensm.partitions import DEFAULT_PKEY, Member, Membership, Partition
from console.tenancy.models import Tenant
from designer.models import DesignRevision
from designer.services import revision_graph

#: Sources whose partitions the console writes (an operator's are kept as written).
AUTHORED = frozenset({"default", "manual", "reservation", "service"})


def owners_of(desired: Mapping[str, Any]) -> dict[int, str]:
    """Port GUID → ``tenant:<id>`` (a reservation's hosts) or ``service:<name>`` (service hosts)."""
    owners: dict[int, str] = {}
    for p in desired.get("partitions", []):
        if p.get("source") == "reservation" and p.get("tenant_id") is not None:
            for port, _ in p["members"]:
                guid = parse_guid(str(port))
                if guid is not None:
                    owners[guid] = f"{TENANT}{p['tenant_id']}"
        elif p.get("source") == "service":
            for port, membership in p["members"]:
                guid = parse_guid(str(port))
                if guid is not None and membership != "limited":
                    owners.setdefault(guid, f"{SERVICE}{p['name']}")
    return owners


def partitions_of(desired: Mapping[str, Any], sources: Iterable[str]) -> list[Partition]:
    """The desired partitions of ``sources`` as typed partitions (members as the JSON has them)."""
    wanted = set(sources)
    out = []
    for p in desired.get("partitions", []):
        if p.get("source") not in wanted or p.get("removed"):
            continue
        members = []
        for port, membership in p["members"]:
            guid = parse_guid(str(port))
            members.append(Member(guid if guid is not None else str(port), Membership(membership)))
        pkey = int(p["pkey"], 16)
        out.append(Partition("Default" if pkey == DEFAULT_PKEY else p["name"], pkey, members=tuple(members)))
    return out


def authored_leaks(desired: Mapping[str, Any]) -> list[Leak]:
    """Tenant pairs that could talk through the partitions the console itself writes."""
    return leaks(partitions_of(desired, AUTHORED), owners_of(desired))


def tenant_label(owner: str, tenants: Mapping[int, str]) -> str:
    """``tenant:3`` → the tenant's name (as operators read it)."""
    if owner.startswith(TENANT):
        return tenants.get(int(owner[len(TENANT) :]), owner)
    return owner


@lru_cache(maxsize=16)
def _design_names(revision_pk: int) -> dict[int, str]:
    graph = revision_graph(DesignRevision.objects.get(pk=revision_pk))
    names: dict[int, str] = {}
    for node in graph.nodes.values():
        for i, guid in enumerate(node.port_guids, start=1):
            names[guid] = f"{node.name} {node.hca_name(i)}"
    return names


def port_names(fabric: Fabric) -> dict[int, str]:
    """Port GUID → ``<node> <HCA>`` as the fabric's design names them (revisions never change)."""
    return _design_names(fabric.revision_id)


def refusal(fabric: Fabric, desired: Mapping[str, Any]) -> str | None:
    """Why ``desired`` must not reach OpenSM (two tenants' hosts could talk), naming the pairs;
    None when it keeps them apart."""
    found = authored_leaks(desired)
    if not found:
        return None
    names = port_names(fabric)
    tenants = dict(Tenant.objects.values_list("pk", "name"))
    described = []
    for leak in found[:5]:
        text = leak.describe(names)
        for owner in (leak.owner_a, leak.owner_b):
            text = text.replace(f"{owner}'s", f"{tenant_label(owner, tenants)}'s")
        described.append(text)
    more = f" (and {len(found) - 5} more)" if len(found) > 5 else ""
    return "isolation: " + "; ".join(described) + more
