"""The demo seed: idempotent, grows with every feature so the demo shows all the product does."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.models import Membership, Role, Tenant

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


def seed_all() -> list[str]:
    actor = Actor.system("demo-seed")
    return seed_tenancy(actor)
