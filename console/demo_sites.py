"""The demo's second site: two data centres, a lab each, a pool spanning both (idempotent).

Frankfurt holds the demo's SU1 fabric (``superpod-su1``); Amsterdam a small fat tree of its own
(``ams-ft8``: 8 DGX H100 under 2 leaves), its switches and nodes named ``ams-…`` and its GUIDs
moved (:func:`designer.rebase.rebase`) so the two subnets share none. ``manage.py up`` starts
both labs (:data:`DEMO_LAB_DESIGNS`). The sites are joined by an InfiniBand router; pool
``fra-ams`` holds every node of both, Aurora Labs has a quota in it and a dataset in Amsterdam,
so a request ``near: "dataset:web-corpus-v3"`` has somewhere to go.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role, Tenant

#: (name, slug, location, description); the first holds the demo's SU1 fabric.
DEMO_SITES = [
    ("Frankfurt", "fra", "Frankfurt am Main, DE", "DC1: the SuperPOD scalable unit (superpod-su1)"),
    ("Amsterdam", "ams", "Amsterdam, NL", "DC2: a small fat tree (ams-ft8), where Aurora's corpus lives"),
]
#: How the two demo sites are joined: an InfiniBand router, ~440 km of fibre one way.
DEMO_SITE_LINK = {"kind": "ib_router", "latency_us": 2200.0, "bandwidth_gbps": 400.0}
DEMO_SITE_FABRIC = "superpod-su1"  # the first site's fabric (console.demo.DEMO_FABRIC_DESIGN)
#: The second site's design: (name, description, options, name prefix, GUID step).
DEMO_SITE_DESIGN = (
    "ams-ft8",
    "Second site (Amsterdam): 8 DGX H100 on a 2-leaf fat tree under one spine",
    {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100", "levels": 2},
    "ams-",
    1,
)
#: The designs whose labs ``manage.py up`` starts, first site first.
DEMO_LAB_DESIGNS = (DEMO_SITE_FABRIC, DEMO_SITE_DESIGN[0])
DEMO_SPANNING_POOL = "fra-ams"
#: (tenant slug, guaranteed GPUs, borrowable GPUs) in the spanning pool.
DEMO_SPANNING_QUOTAS = [("aurora", 64, 64)]
#: (tenant slug, dataset, site slug, terabytes, description)
DEMO_DATASETS = [("aurora", "web-corpus-v3", "ams", 180.0, "tokenised pre-training corpus (Parquet shards)")]


def seed_sites(actor: Actor) -> list[str]:
    """Sites, their link, the second site's design, fabric and inventory, the spanning pool and
    the dataset, when missing (:func:`console.demo.seed_all` gives the spanning pool its quotas). Runs after :func:`console.demo.seed_scheduling` (the
    first site's fabric must exist)."""
    from console.fabric.models import Fabric

    first = Fabric.objects.filter(revision__design__name=DEMO_SITE_FABRIC).first()
    if first is None:
        return []
    created, sites = _sites(actor)
    if _place_fabric(actor, first, sites["fra"]):
        created.append(f"fabric {first.name} at site {sites['fra'].name}")
    second, more = _second_fabric(actor, sites["ams"])
    created += more
    if second is None:
        return created
    return created + _spanning_pool(actor, first, second) + _datasets(actor, sites)


def _sites(actor: Actor) -> tuple[list[str], dict[str, Any]]:
    from console.fabric.models import Site, SiteLink

    created: list[str] = []
    sites = {}
    with transaction.atomic():
        for name, slug, location, description in DEMO_SITES:
            site, made = Site.objects.get_or_create(
                slug=slug, defaults={"name": name, "location": location, "description": description}
            )
            sites[slug] = site
            if made:
                audit.record(actor, "site.create", site, after=audit.snapshot(site))
                created.append(f"site {name}")
        a, b = sorted(sites.values(), key=lambda s: s.pk)
        link, made = SiteLink.objects.get_or_create(a=a, b=b, defaults=DEMO_SITE_LINK)
        if made:
            audit.record(actor, "site_link.create", link, after=audit.snapshot(link))
            created.append(f"site link {a.slug}–{b.slug} ({link.kind})")
    return created, sites


def _place_fabric(actor: Actor, fabric: Any, site: Any) -> bool:
    """Put a fabric without a site at ``site``; an operator's choice is left alone."""
    if fabric.site_id is not None:
        return False
    with transaction.atomic():
        before = audit.snapshot(fabric)
        fabric.site = site
        fabric.save(update_fields=["site"])
        audit.record(actor, "fabric.update", fabric, before=before, after=audit.snapshot(fabric))
    return True


def _second_fabric(actor: Actor, site: Any) -> tuple[Any, list[str]]:
    """The second site's design (rebased: names and GUIDs of its own), its lab fabric and
    inventory."""
    from console.fabric.models import Fabric
    from designer import services
    from designer.models import Design, DesignRevision
    from designer.rebase import rebase
    from scheduling.services import inventory

    name, description, options, prefix, step = DEMO_SITE_DESIGN
    operator = Principal(None, Role.OPERATOR, None)
    created: list[str] = []
    if not Design.objects.filter(name=name).exists():
        design, first = services.create_design(actor, operator, name=name, options=options, description=description)
        graph = rebase(first.graph, step=step, prefix=prefix)
        services.add_revision(
            actor, operator, design, graph_data=graph, message=f"names {prefix}… and GUIDs of its own"
        )
        created.append(f"design {name}")
    fabric = Fabric.objects.filter(revision__design__name=name).first()
    if fabric is None:
        revision = DesignRevision.objects.filter(design__name=name).order_by("-number").first()
        if revision is None:
            return None, created
        with transaction.atomic():
            fabric = Fabric.objects.create(
                name=name, revision=revision, driver=Fabric.Driver.LAB, site=site, description=description
            )
            audit.record(actor, "fabric.create", fabric, after=audit.snapshot(fabric))
        created.append(f"fabric {name} at site {site.name}")
    elif _place_fabric(actor, fabric, site):
        created.append(f"fabric {fabric.name} at site {site.name}")
    if any(inventory.import_inventory(fabric, actor=actor).as_dict().values()):
        created.append(f"inventory of {fabric.name}")
    return fabric, created


def _sm_nodes(first: Any, second: Any) -> list[str]:
    """The nodes the labs' subnet managers run on (no tenant may hold one: see console.demo): the
    first site's master and standby, the second site's one."""
    from console.fabric.lab.plan import sm_node, sm_nodes
    from designer.services import revision_graph

    return [*sm_nodes(revision_graph(first.revision)), sm_node(revision_graph(second.revision))]


def _spanning_pool(actor: Actor, first: Any, second: Any) -> list[str]:
    from scheduling.models import Node, Pool
    from scheduling.services import inventory

    operator = Principal(None, Role.OPERATOR, None)
    created: list[str] = []
    pool = Pool.objects.filter(fabric=first, name=DEMO_SPANNING_POOL).first()
    if pool is None:
        pool = inventory.create_pool(
            actor,
            operator,
            fabric=first,
            name=DEMO_SPANNING_POOL,
            kind=Pool.Kind.MANUAL,
            nodes=list(Node.objects.filter(fabric__in=[first, second]).exclude(name__in=_sm_nodes(first, second))),
            description="both sites: Frankfurt's SU1 (30 DGX H100) and Amsterdam's 7 DGX H100 "
            "(the subnet managers run on nodes of their own: Frankfurt's master and standby, Amsterdam's)",
        )
        created.append(f"pool {pool.name} spanning two sites")
    return created


def _datasets(actor: Actor, sites: dict[str, Any]) -> list[str]:
    from scheduling.models import Dataset

    created: list[str] = []
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=[d[0] for d in DEMO_DATASETS])}
    for slug, name, site, size_tb, description in DEMO_DATASETS:
        tenant = tenants.get(slug)
        if tenant is None or Dataset.objects.filter(tenant=tenant, name=name).exists():
            continue
        with transaction.atomic():
            dataset = Dataset.objects.create(
                tenant=tenant, name=name, site=sites[site], size_tb=size_tb, description=description
            )
            audit.record(actor, "dataset.create", dataset, after=audit.snapshot(dataset))
        created.append(f"dataset {name} of {slug} at site {sites[site].name}")
    return created
