"""The demo seed: idempotent, grows with every feature so the demo shows all the product does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from console.tenancy import audit
from console.tenancy.actions import check_password_strength
from console.tenancy.context import Actor
from console.tenancy.models import Membership, Principal, Role, Tenant

DEMO_PASSWORD = "ibconsole-demo"


@dataclass(frozen=True)
class DemoAccount:
    username: str
    role: str
    tenant_slug: str | None
    note: str


DEMO_TENANTS = [
    ("Aurora Labs", "aurora", "LLM pre-training team"),
    ("Borealis AI", "borealis", "Inference and fine-tuning"),
]
DEMO_ACCOUNTS = [
    DemoAccount("operator", Role.OPERATOR, None, "fabric operator, sees every tenant"),
    DemoAccount("alice", Role.TENANT_ADMIN, "aurora", "Aurora Labs (tenant admin)"),
    DemoAccount("bob", Role.TENANT_ADMIN, "borealis", "Borealis AI (tenant admin)"),
    DemoAccount("auditor", Role.AUDITOR, None, "read-only everywhere"),
]


def seed_tenancy(actor: Actor) -> list[str]:
    """Create demo tenants and accounts that are missing; never touch existing ones."""
    User = get_user_model()
    created: list[str] = []
    with transaction.atomic():
        tenants = {}
        for name, slug, description in DEMO_TENANTS:
            tenant, made = Tenant.objects.get_or_create(slug=slug, defaults={"name": name, "description": description})
            tenants[slug] = tenant
            if made:
                audit.record(actor, "tenant.create", tenant, after=audit.snapshot(tenant))
                created.append(f"tenant {name}")
        for account in DEMO_ACCOUNTS:
            if User.objects.filter(username=account.username).exists():
                continue
            # The demo password is public (README, `manage.py up`), but it still passes the validators.
            check_password_strength(DEMO_PASSWORD, username=account.username)
            user = User.objects.create_user(account.username, password=DEMO_PASSWORD)
            membership = Membership.objects.create(
                user=user,
                role=account.role,
                tenant=tenants[account.tenant_slug] if account.tenant_slug else None,
            )
            audit.record(actor, "member.create", membership, after=audit.snapshot(membership))
            created.append(f"user {account.username}")
    return created


DEMO_DESIGNS = [
    (
        "superpod-2048",
        "DGX SuperPOD-style: 8 scalable units of 32 DGX H100, rail-optimised, QM9700",
        {"topology": "rail-optimized", "gpus": 2048, "node_type": "DGX-H100", "switch": "QM9700"},
    ),
    (
        "superpod-su1",
        "One scalable unit: 32 DGX H100, 8 rail leaves, 4 spines",
        {"topology": "rail-optimized", "gpus": 256, "node_type": "DGX-H100", "switch": "QM9700"},
    ),
]


def seed_designs(actor: Actor) -> list[str]:
    """The demo designs (the 2,048-GPU SuperPOD-style fabric and a 1-SU one), when missing."""
    from designer import services
    from designer.models import Design

    principal = Principal(None, Role.OPERATOR, None)
    created = []
    for name, description, options in DEMO_DESIGNS:
        if Design.objects.filter(name=name).exists():
            continue
        services.create_design(actor, principal, name=name, options=options, description=description)
        created.append(f"design {name}")
    return created


DEMO_FABRIC_DESIGN = "superpod-su1"
DEMO_POOL = "su1"
# (tenant slug, guaranteed GPUs, borrowable GPUs)
DEMO_QUOTAS = [("aurora", 128, 64), ("borealis", 64, 32)]
#: The priority classes each demo tenant's quota allows (inference is granted: Borealis serves
#: models, up to 32 GPUs of it at once; Aurora trains) and its inference share.
DEMO_CLASSES = {"borealis": (["training", "inference", "best-effort"], 32)}
# (tenant slug, reservation name, GPUs, hours, priority class)
DEMO_RESERVATIONS = [
    ("aurora", "llm-pretrain-7b", 64, 8, "training"),
    ("borealis", "inference-canary", 16, 4, "inference"),
]


def seed_scheduling(actor: Actor) -> list[str]:
    """The demo fabric's inventory, a pool, quotas for both tenants and a couple of live
    reservations. The fabric is the one bound to ``superpod-su1`` (the lab start creates it);
    without one, a lab fabric is bound to the design's latest revision."""
    import datetime as dt

    from console.fabric.models import Fabric
    from designer.models import DesignRevision
    from scheduling.models import Node, Pool, Reservation
    from scheduling.services import inventory, reservations

    operator = Principal(None, Role.OPERATOR, None)
    created: list[str] = []
    fabric = Fabric.objects.filter(revision__design__name=DEMO_FABRIC_DESIGN).first()
    if fabric is None:
        revision = DesignRevision.objects.filter(design__name=DEMO_FABRIC_DESIGN).order_by("-number").first()
        if revision is None:
            return created
        with transaction.atomic():
            fabric, made = Fabric.objects.get_or_create(
                name=DEMO_FABRIC_DESIGN, defaults={"revision": revision, "driver": "lab"}
            )
            if made:
                audit.record(actor, "fabric.create", fabric, after=audit.snapshot(fabric))
                created.append(f"fabric {fabric.name}")
    if any(inventory.import_inventory(fabric, actor=actor).as_dict().values()):
        created.append(f"inventory of {fabric.name}")
    pool = Pool.objects.filter(fabric=fabric, name=DEMO_POOL).first()
    management = management_nodes(fabric)
    if pool is None:
        nodes = list(Node.objects.filter(fabric=fabric).exclude(name__in=management))
        pool = inventory.create_pool(
            actor,
            operator,
            fabric=fabric,
            name=DEMO_POOL,
            kind=Pool.Kind.BY_SU,
            nodes=nodes,
            description=f"scalable unit 1: {len(nodes)} DGX H100 ({' and '.join(management)} run the subnet "
            f"managers, master and standby; {management[0]} is the login node)",
        )
        created.append(f"pool {pool.name}")
    created += seed_login_service(actor, fabric, management[0])
    created += [f"quota {slug}" for slug in seed_quotas(actor, pool, DEMO_QUOTAS)]
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=[q[0] for q in DEMO_QUOTAS])}
    for slug, name, gpus, hours, priority in DEMO_RESERVATIONS:
        tenant = tenants.get(slug)
        if tenant is None or Reservation.objects.live().filter(tenant=tenant, name=name).exists():
            continue
        request = reservations.ReservationRequest(
            pool_id=pool.pk,
            gpus=gpus,
            duration=dt.timedelta(hours=hours),
            priority_class=priority,
            name=name,
            tenant_id=tenant.pk,
        )
        reservation = reservations.reserve(actor, operator, request)
        created.append(f"reservation {name} ({reservation.status})")
    return created + seed_usage_history(pool, tenants)


def management_nodes(fabric: Any) -> list[str]:
    """The nodes of ``fabric`` its lab's subnet managers run on, master and standby (kept out of
    pools: their ports are full members of the Default partition, so a holder would reach every
    host)."""
    from console.fabric.lab.plan import sm_nodes
    from designer.services import revision_graph

    return sm_nodes(revision_graph(fabric.revision))


#: The login node's service partition: every tenant's hosts reach it (limited members), not
#: each other. Its P_Key is below the fabric's reservation range (0x0100 up).
DEMO_LOGIN_PKEY = 0x0040


def seed_login_service(actor: Actor, fabric: Any, node: str) -> list[str]:
    """A service partition making ``node`` (the management node) reachable from the demo
    tenants' reservations, when missing."""
    from console.fabric import changes
    from console.fabric.models import FabricPartition
    from scheduling.models import HCA

    if FabricPartition.objects.filter(fabric=fabric, name="login").exists():
        return []
    guids = list(HCA.objects.filter(node__fabric=fabric, node__name=node).values_list("port_guid", flat=True))
    access = changes.service_access([slug for slug, *_ in DEMO_QUOTAS], "login and management node")
    operator = Principal(None, Role.OPERATOR, None)
    changes.set_partition(actor, operator, fabric, name="login", pkey=DEMO_LOGIN_PKEY, members=guids, service=access)
    return [f"service partition login ({node})"]


def seed_quotas(actor: Actor, pool: Any, rows: list[tuple[str, int, int]]) -> list[str]:
    """The quotas of ``rows`` (tenant slug, guaranteed GPUs, borrowable GPUs) in ``pool`` that are
    missing; returns the slugs of the tenants given one."""
    from scheduling.models import Quota
    from scheduling.services import quotas

    operator = Principal(None, Role.OPERATOR, None)
    made = []
    tenants = {t.slug: t for t in Tenant.objects.filter(slug__in=[row[0] for row in rows])}
    for slug, guaranteed, borrow in rows:
        if slug in tenants and not Quota.objects.filter(tenant=tenants[slug], pool=pool).exists():
            classes, high = DEMO_CLASSES.get(slug, (None, None))
            quotas.set_quota(
                actor,
                operator,
                tenant=tenants[slug],
                pool=pool,
                guaranteed_gpus=guaranteed,
                borrow_limit_gpus=borrow,
                classes=classes,
                high_priority_gpus=high,
            )
            made.append(slug)
    return made


#: Two weeks of finished reservations, so the usage page has something to chart: (tenant, name,
#: GPUs, start hour UTC, hours, class, borrowed, every n-th day, preempted after hours or None).
DEMO_HISTORY = [
    ("aurora", "pretrain", 64, 6, 12, "training", False, 1, None),
    ("aurora", "sweep", 32, 20, 6, "training", True, 3, 2),
    ("borealis", "serve", 16, 0, 24, "inference", False, 1, None),
    ("borealis", "eval", 48, 9, 5, "best-effort", True, 2, None),
]
DEMO_HISTORY_DAYS = 14


def seed_usage_history(pool: Any, tenants: dict[str, Tenant]) -> list[str]:
    """Finished reservations of the last two weeks, as released (or preempted) rows. They held
    GPUs in the past only, so they carry no allocations and no P_Key: the reservation service
    refuses windows in the past, and the usage report reads nothing else."""
    import datetime as dt

    from django.db.models import F
    from django.utils import timezone

    from scheduling.models import Reservation

    if Reservation.objects.filter(pool=pool, name__startswith="history-").exists():
        return []
    today = timezone.now().astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    rows = []
    for back in range(DEMO_HISTORY_DAYS, 0, -1):
        day = today - dt.timedelta(days=back)
        for slug, name, gpus, hour, hours, priority, borrowed, every, preempted_after in DEMO_HISTORY:
            tenant = tenants.get(slug)
            if tenant is None or back % every:
                continue
            start = day + dt.timedelta(hours=hour)
            end = start + dt.timedelta(hours=hours)
            ended = start + dt.timedelta(hours=preempted_after) if preempted_after else end
            rows.append(
                Reservation(
                    tenant=tenant,
                    pool=pool,
                    fabric_id=pool.fabric_id,
                    name=f"history-{name}-{day:%m%d}",
                    status=Reservation.Status.PREEMPTED if preempted_after else Reservation.Status.RELEASED,
                    reason="borrowed GPUs reclaimed for a guarantee" if preempted_after else "",
                    priority_class=priority,
                    requested_gpus=gpus,
                    gpus=gpus,
                    borrowed=borrowed,
                    start=start,
                    end=end,
                    ready_at=start,
                    ended_at=ended,
                )
            )
    Reservation.objects.bulk_create(rows)
    # Booked when they started, not now: lists newest-booked first show the live demo reservations
    # above two weeks of history (created_at is auto_now_add, so set after the insert).
    Reservation.objects.filter(pool=pool, name__startswith="history-").update(created_at=F("start"))
    return [f"{len(rows)} finished reservations (usage history)"] if rows else []


def seed_power(actor: Actor) -> list[str]:
    """A Redfish BMC for every demo node, at the sushy-emulator `manage.py up` starts (one
    emulated system per node; the credentials are stored encrypted like any)."""
    from console.fabric.models import Fabric
    from console.power import emulator
    from console.power.models import Bmc
    from console.power.services import set_bmc
    from scheduling.models import Node

    fabric = Fabric.objects.filter(revision__design__name=DEMO_FABRIC_DESIGN).first()
    if fabric is None:
        return []
    created = 0
    for node in Node.objects.filter(fabric=fabric).exclude(pk__in=Bmc.objects.values("node_id")):
        data = {
            "driver": Bmc.Driver.REDFISH,
            "address": emulator.demo_url(),
            "username": emulator.DEFAULT_USERNAME,
            "password": emulator.DEFAULT_PASSWORD,
            "system_id": emulator.system_path(node.name),
            "verify_tls": False,
        }
        set_bmc(node.pk, actor=actor, data=data)
        created += 1
    return [f"{created} BMCs at the Redfish emulator"] if created else []


#: A week of nights (UTC) in which the power policy switched the demo's last nodes off, so the
#: energy figures (dashboard, usage page, /api/energy/) show a saving: (nodes, off at, on at).
DEMO_NIGHTS = (12, 22, 6)
DEMO_NIGHTS_DAYS = 7


def seed_power_history() -> list[str]:
    """Recorded power history: nights off for the demo's last nodes over the past week (past
    nights only, each node back on by morning, as its BMC reports now)."""
    import datetime as dt

    from django.utils import timezone

    from console.fabric.models import Fabric
    from console.power.models import PowerEvent
    from scheduling.models import Node

    fabric = Fabric.objects.filter(revision__design__name=DEMO_FABRIC_DESIGN).first()
    if fabric is None or PowerEvent.objects.filter(node__fabric=fabric, actor="policy").exists():
        return []
    count, off_hour, on_hour = DEMO_NIGHTS
    nodes = list(Node.objects.filter(fabric=fabric).order_by("-name")[:count])
    now = timezone.now()
    today = now.astimezone(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    steps = (
        (dt.timedelta(hours=off_hour), "on", "powering-off", "idle past the policy's limit"),
        (dt.timedelta(hours=off_hour, minutes=2), "powering-off", "off", "the BMC reports off"),
        (dt.timedelta(hours=24 + on_hour), "off", "powering-on", "a reservation starts within its boot time"),
        (dt.timedelta(hours=24 + on_hour, minutes=5), "powering-on", "on", "the BMC reports on"),
    )
    rows = [
        PowerEvent(node=node, from_state=was, to_state=to, at=day + after, intended=True, actor="policy", reason=why)
        for back in range(DEMO_NIGHTS_DAYS, 0, -1)
        for day in [today - dt.timedelta(days=back)]
        if day + steps[-1][0] < now
        for node in nodes
        for after, was, to, why in steps
    ]
    PowerEvent.objects.bulk_create(rows)
    return [f"{len(rows)} power events (nights off, energy saved)"] if rows else []


def seed_all() -> list[str]:
    from console.demo_sites import DEMO_SPANNING_POOL, DEMO_SPANNING_QUOTAS, seed_sites
    from scheduling.models import Pool

    actor = Actor.system("demo-seed")
    seeded = seed_tenancy(actor) + seed_designs(actor) + seed_scheduling(actor) + seed_sites(actor)
    # the spanning pool's quotas are seeded here: console.demo_sites does not import this module
    for spanning in Pool.objects.filter(name=DEMO_SPANNING_POOL):
        seeded += [f"quota {slug} in {spanning.name}" for slug in seed_quotas(actor, spanning, DEMO_SPANNING_QUOTAS)]
    return seeded + seed_power(actor) + seed_power_history()
