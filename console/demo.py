"""The demo seed: idempotent, grows with every feature so the demo shows all the product does."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from console.tenancy import audit
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
            tenant, made = Tenant.objects.get_or_create(
                slug=slug, defaults={"name": name, "description": description}
            )
            tenants[slug] = tenant
            if made:
                audit.record(actor, "tenant.create", tenant, after=audit.snapshot(tenant))
                created.append(f"tenant {name}")
        for account in DEMO_ACCOUNTS:
            if User.objects.filter(username=account.username).exists():
                continue
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
        services.create_design(actor, principal, name=name, options=options,
                               description=description)  # fmt: skip
        created.append(f"design {name}")
    return created


def seed_all() -> list[str]:
    actor = Actor.system("demo-seed")
    return seed_tenancy(actor) + seed_designs(actor)
