"""Inventory and pools: nodes, GPUs and HCAs expanded from a fabric's design, grouped in pools.

Every mutation is one function (permission check, change, audit row in one transaction).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F, Q

from console.fabric.models import Fabric
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator
from designer.services import revision_graph
from scheduling.models import GPU, HCA, Node, Pool
from scheduling.services import notices
from scheduling.services.locks import node_for_update, pool_for_update, reservation_lock
from scheduling.services.publish import enqueue_queue_pass
from scheduling.services.topology import specs_from_graph

#: Memory of the GPU models the catalogue knows (GB); unknown models record 0.
GPU_MEMORY_GB = {"H100": 80, "H200": 141, "A100": 80, "B200": 192, "GB200": 192, "L40S": 48}
_GUID = re.compile(r"^(0x)?[0-9a-fA-F]{1,16}$")


def format_guid(value: int | str) -> str:
    """``0x`` + 16 lower-case hex digits, the form partitions.conf and discovery use."""
    if isinstance(value, str):
        if not _GUID.match(value.strip()):
            raise Invalid(f"{value!r} is not a port GUID (up to 16 hex digits, 0x optional)")
        value = int(value.strip(), 16)
    return f"0x{value:016x}"


@dataclass(frozen=True)
class ImportResult:
    """What :func:`import_inventory` created (zeros on a repeat run)."""

    nodes: int
    gpus: int
    hcas: int

    def as_dict(self) -> dict[str, int]:
        return {"nodes": self.nodes, "gpus": self.gpus, "hcas": self.hcas}


def import_inventory(fabric: Fabric, *, actor: Actor | None = None) -> ImportResult:
    """Create the fabric's nodes, GPUs and HCAs from its design revision; idempotent.

    Existing rows are kept as they are (states, health and discovered GUIDs survive a re-run);
    only missing nodes, GPUs and HCA ports are added, in bulk.
    """
    graph = revision_graph(fabric.revision)
    specs = {s.name: s for s in specs_from_graph(graph)}
    actor = actor or Actor.system("scheduling.import_inventory")
    with transaction.atomic():
        existing = set(Node.objects.filter(fabric=fabric).values_list("name", flat=True))
        new_nodes = [
            Node(
                fabric=fabric,
                name=name,
                node_type=graph.nodes[name].node_type,
                su=spec.su,
                rack=graph.nodes[name].rack,
                gpu_model=spec.gpu_model,
                gpus=spec.gpus,
            )
            for name, spec in specs.items()
            if name not in existing
        ]
        Node.objects.bulk_create(new_nodes, batch_size=1000)
        nodes = {n.name: n for n in Node.objects.filter(fabric=fabric, name__in=list(specs))}
        have_gpu = set(GPU.objects.filter(node__fabric=fabric).values_list("node_id", "index"))
        have_hca = set(HCA.objects.filter(node__fabric=fabric).values_list("node_id", "index"))
        gpus, hcas = [], []
        for name, node in nodes.items():
            spec = specs[name]
            designed = graph.nodes[name]
            for i in range(spec.gpus):
                if (node.pk, i) not in have_gpu:
                    memory = GPU_MEMORY_GB.get(spec.gpu_model, 0)
                    gpus.append(GPU(node=node, index=i, model=spec.gpu_model, memory_gb=memory))
            for i, guid in enumerate(designed.port_guids):
                if (node.pk, i) in have_hca:
                    continue
                link = graph.link_at(name, i + 1)
                leaf_port = None
                if link is not None:
                    leaf_port = link.b_port if link.a == name else link.a_port
                rail = designed.rails[i] if i < len(designed.rails) else -1
                hcas.append(
                    HCA(
                        node=node,
                        index=i,
                        rail=rail,
                        port_guid=format_guid(guid),
                        leaf=spec.leaves[i],
                        leaf_port=leaf_port,
                    )
                )
        GPU.objects.bulk_create(gpus, batch_size=2000)
        HCA.objects.bulk_create(hcas, batch_size=2000)
        result = ImportResult(len(new_nodes), len(gpus), len(hcas))
        if new_nodes or gpus or hcas:
            # GPU and node keys are cached in pool topologies: invalidate them.
            # A pool at several sites holds nodes of fabrics other than its own.
            spanning = Pool.objects.filter(nodes__fabric=fabric).values("pk")
            Pool.objects.filter(Q(fabric=fabric) | Q(pk__in=spanning)).update(version=F("version") + 1)
            audit.record(
                actor,
                "inventory.import",
                fabric,
                object_type="fabric.fabric",
                after={"revision": fabric.revision_id, **result.as_dict()},
            )
    return result


def update_guids(fabric: Fabric, guids: dict[str, list[str]], *, actor: Actor | None = None) -> int:
    """Replace planned port GUIDs with discovered ones: ``{node name: [GUID of port 1, …]}``.

    Returns the number of HCA ports whose GUID changed. Unknown nodes are an error that names
    them; a node with fewer discovered ports keeps the planned GUIDs of the rest.
    """
    actor = actor or Actor.system("scheduling.update_guids")
    unknown = sorted(
        set(guids) - set(Node.objects.filter(fabric=fabric, name__in=list(guids)).values_list("name", flat=True))
    )
    if unknown:
        raise Invalid(f"unknown node(s) on fabric {fabric}: {', '.join(unknown[:10])}")
    wanted = {(name, i): format_guid(g) for name, ports in guids.items() for i, g in enumerate(ports)}
    changed: list[HCA] = []
    with transaction.atomic():
        for hca in HCA.objects.filter(node__fabric=fabric, node__name__in=list(guids)).select_related("node"):
            guid = wanted.get((hca.node.name, hca.index))
            if guid is not None and guid != hca.port_guid:
                hca.port_guid = guid
                changed.append(hca)
        HCA.objects.bulk_update(changed, ["port_guid"], batch_size=2000)
        if changed:
            audit.record(
                actor,
                "inventory.update_guids",
                fabric,
                object_type="fabric.fabric",
                after={"ports_changed": len(changed)},
            )
    return len(changed)


def set_node_state(actor: Actor, principal: Principal, node: Node, state: str) -> Node:
    """Mark a node available, draining, down or powered off (operators only)."""
    require_operator(principal, to="manage inventory, pools and quotas")
    if state not in Node.State.values:
        raise Invalid(f"unknown node state {state!r}", fields={"state": [str(Node.State.values)]})
    with transaction.atomic():
        node = node_for_update(node.pk)
        before = audit.snapshot(node)
        node.state = state
        node.save(update_fields=["state"])
        audit.record(actor, "node.state", node, before=before, after=audit.snapshot(node))
        if state == Node.State.AVAILABLE and before["state"] != state:
            # Back in service: the queues of its pools may move.
            enqueue_queue_pass(Pool.nodes.through.objects.filter(node_id=node.pk).values_list("pool_id", flat=True))
        if state in (Node.State.DOWN, Node.State.OFF) and before["state"] != state:
            notices.node_failed(node)  # the live reservations on it hear of it
    return node


def select_nodes(
    fabric: Fabric, kind: str, *, gpu_model: str = "", sus: Iterable[int] = (), names: Iterable[str] = ()
) -> list[Node]:
    """The fabric's nodes for a pool of ``kind``: by GPU model, by scalable unit or by name (a
    manual pool's names may be ``FABRIC/NODE``, nodes of other fabrics: :func:`nodes_by_name`)."""
    queryset = Node.objects.filter(fabric=fabric)
    if kind == Pool.Kind.BY_MODEL:
        if not gpu_model:
            raise Invalid("a by_model pool needs gpu_model", fields={"gpu_model": ["required"]})
        return list(queryset.filter(gpu_model=gpu_model))
    if kind == Pool.Kind.BY_SU:
        wanted = sorted(set(sus))
        if not wanted:
            raise Invalid("a by_su pool needs scalable units", fields={"sus": ["required"]})
        return list(queryset.filter(su__in=wanted))
    if kind == Pool.Kind.MANUAL:
        names = list(names)
        return nodes_by_name(fabric, names) if names else list(queryset)
    raise Invalid(f"unknown pool kind {kind!r}", fields={"kind": [str(Pool.Kind.values)]})


def nodes_by_name(fabric: Fabric, names: list[str]) -> list[Node]:
    """The nodes ``names`` of a manual pool whose home is ``fabric``: ``FABRIC/NODE`` names a node
    of that fabric, a bare name a node of the pool's candidate fabrics (its home fabric and those
    named as ``FABRIC/``). Node names repeat across fabrics (designs name them alike): a bare name
    on several candidates is refused with the qualified choices, never taken from one of them."""
    parts = [name.rpartition("/") for name in names]
    named = {f for f, _, _ in parts if f}
    fabric_pk = dict(Fabric.objects.filter(name__in=named).values_list("name", "pk"))
    if unknown := sorted(named - set(fabric_pk)):
        raise Invalid(f"unknown fabric(s): {', '.join(unknown[:10])}", fields={"nodes": unknown})
    candidates = {fabric.pk, *fabric_pk.values()}
    rows = Node.objects.filter(fabric_id__in=candidates, name__in={n for _, _, n in parts}).select_related("fabric")
    qualified = {f"{n.fabric.name}/{n.name}": n for n in rows}
    bare: dict[str, list[str]] = {}
    for key, node in sorted(qualified.items()):
        bare.setdefault(node.name, []).append(key)
    ambiguous = {name: bare[name] for f, _, name in parts if not f and len(bare.get(name, ())) > 1}
    if ambiguous:
        said = "; ".join(f"{name} ({' or '.join(choices)})" for name, choices in sorted(ambiguous.items()))
        raise Invalid(
            f"ambiguous node name(s), on several fabrics: {said}; name the fabric as FABRIC/NODE",
            fields={"nodes": ambiguous},
        )
    keys = [f"{f}/{name}" if f else bare.get(name, [name])[0] for f, _, name in parts]
    if missing := sorted({name for name, key in zip(names, keys, strict=True) if key not in qualified}):
        elsewhere = (
            Node.objects.filter(name__in=missing).exclude(fabric_id__in=candidates).values_list("fabric__name", "name")
        )
        other = [f"{f}/{n}" for f, n in sorted(elsewhere)[:10]]
        hint = f" (on other fabrics: {', '.join(other)}; name them so)" if other else ""
        raise Invalid(f"unknown node(s): {', '.join(missing[:10])}{hint}", fields={"nodes": missing})
    return list({qualified[key].pk: qualified[key] for key in keys}.values())


def create_pool(
    actor: Actor,
    principal: Principal,
    *,
    fabric: Fabric,
    name: str,
    kind: str = Pool.Kind.MANUAL,
    nodes: list[Node],
    description: str = "",
    default_max_wait: dt.timedelta | None = None,
) -> Pool:
    """Create a pool of ``nodes`` (operators only); ``default_max_wait``: the patience of its
    queued requests that give none. ``fabric`` is its home fabric; nodes of other fabrics (other
    sites) make a pool spanning sites, as long as the home fabric holds some of them."""
    require_operator(principal, to="manage inventory, pools and quotas")
    if nodes and all(n.fabric_id != fabric.pk for n in nodes):
        raise Invalid("a pool's home fabric must hold some of its nodes")
    try:
        with transaction.atomic():
            pool = Pool.objects.create(
                fabric=fabric, name=name, kind=kind, description=description, default_max_wait=default_max_wait
            )
            pool.nodes.set(nodes)  # its reservation-lock row came with it (scheduling.models)
            audit.record(actor, "pool.create", pool, after={**audit.snapshot(pool), "nodes": len(nodes)})
    except IntegrityError as exc:
        raise Conflict(f"fabric {fabric} already has a pool named {name!r}") from exc
    return pool


def set_default_max_wait(actor: Actor, principal: Principal, pool: Pool, value: dt.timedelta | None) -> Pool:
    """Set the patience of a pool's queued requests that give no ``max_wait`` (operators only;
    requests already queued keep theirs)."""
    require_operator(principal, to="manage inventory, pools and quotas")
    if value is not None and value < dt.timedelta(0):
        raise Invalid("max_wait cannot be negative", fields={"default_max_wait_minutes": ["negative"]})
    with transaction.atomic():
        pool = pool_for_update(pool.pk)
        before = audit.snapshot(pool)
        pool.default_max_wait = value
        pool.save(update_fields=["default_max_wait"])
        audit.record(actor, "pool.patience", pool, before=before, after=audit.snapshot(pool))
    return pool


def set_pool_nodes(actor: Actor, principal: Principal, pool: Pool, nodes: list[Node]) -> Pool:
    """Replace a pool's nodes; live reservations keep theirs (they hold allocations)."""
    require_operator(principal, to="manage inventory, pools and quotas")
    with transaction.atomic():
        pool = pool_for_update(pool.pk)  # its members stay as read until commit
        members = set(pool.nodes.values_list("pk", flat=True))
        # No placement on the pool while its nodes change, nor on another pool holding a node that
        # comes or goes: such a booking bumps the pools its nodes are in (snapshots.touch).
        reservation_lock(pool_ids=[pool.pk], node_ids=sorted(members ^ {n.pk for n in nodes}))
        before = sorted(pool.nodes.values_list("name", flat=True))
        pool.nodes.set(nodes)
        Pool.objects.filter(pk=pool.pk).update(version=F("version") + 1)
        audit.record(
            actor, "pool.nodes", pool, before={"nodes": before}, after={"nodes": sorted(n.name for n in nodes)}
        )
    pool.refresh_from_db()
    return pool


def delete_pool(actor: Actor, principal: Principal, pool: Pool) -> None:
    """Delete a pool without reservations (operators only)."""
    require_operator(principal, to="manage inventory, pools and quotas")
    with transaction.atomic():
        audit.record(actor, "pool.delete", pool, before=audit.snapshot(pool))
        try:
            with transaction.atomic():
                pool.delete()
        except IntegrityError as exc:
            raise Conflict(f"pool {pool.name!r} still has reservations") from exc
