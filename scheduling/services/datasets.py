"""Datasets: data a tenant keeps at a site, which requests name with ``near: "dataset:<name>"``.

One write path for the API and the Datasets page: a tenant registers, changes and deletes its
own (another tenant's dataset is not found: 404); operators may register one for any tenant.
Every write is audited in its own transaction; a name is unique per tenant (``Conflict``, 409).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from console.fabric.models import Site
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Forbidden, Invalid
from console.tenancy.models import Principal, Tenant
from scheduling.models import Dataset

FIELDS = ("name", "site", "size_tb", "description")


def _check_writer(principal: Principal, tenant: Tenant) -> None:
    if not principal.can_write:
        raise Forbidden("read-only access")
    if not principal.is_operator and principal.tenant_id != tenant.pk:
        raise Forbidden("a tenant registers datasets only for itself")


def _validate(values: dict[str, Any]) -> None:
    name = str(values.get("name") or "").strip()
    if not name or len(name) > 100 or name != values.get("name"):
        raise Invalid("a dataset needs a name (1-100 characters, no surrounding spaces)", fields={"name": ["invalid"]})
    if not isinstance(values.get("site"), Site):
        raise Invalid("a dataset is registered at a site", fields={"site": ["required"]})
    size = values.get("size_tb", 0)
    if size is None or size < 0:
        raise Invalid("size is zero or more terabytes", fields={"size_tb": ["must be ≥ 0"]})


def register_dataset(actor: Actor, principal: Principal, *, tenant: Tenant, **values: Any) -> Dataset:
    """Register ``tenant``'s dataset at a site."""
    _check_writer(principal, tenant)
    values = {k: v for k, v in values.items() if k in FIELDS}
    _validate(values)
    try:
        with transaction.atomic():
            dataset = Dataset.objects.create(tenant=tenant, **values)
            audit.record(actor, "dataset.create", dataset, after=audit.snapshot(dataset))
    except IntegrityError as exc:
        raise Conflict(f"a dataset named {values['name']!r} exists", fields={"name": ["exists"]}) from exc
    return dataset


def update_dataset(actor: Actor, principal: Principal, dataset: Dataset, **values: Any) -> Dataset:
    """Rename, move to another site, or change the size or description (the owner stays)."""
    _check_writer(principal, dataset.tenant)
    try:
        with transaction.atomic():
            dataset = Dataset.objects.select_for_update().get(pk=dataset.pk)
            before = audit.snapshot(dataset)
            for key, value in values.items():
                if key in FIELDS:
                    setattr(dataset, key, value)
            _validate({"name": dataset.name, "site": dataset.site, "size_tb": dataset.size_tb})
            dataset.save()
            audit.record(actor, "dataset.update", dataset, before=before, after=audit.snapshot(dataset))
    except IntegrityError as exc:
        raise Conflict(f"a dataset named {dataset.name!r} exists", fields={"name": ["exists"]}) from exc
    return dataset


def delete_dataset(actor: Actor, principal: Principal, dataset: Dataset) -> None:
    """Forget a dataset (requests that named it keep their placement; ``near_dataset`` empties)."""
    _check_writer(principal, dataset.tenant)
    with transaction.atomic():
        audit.record(actor, "dataset.delete", dataset, before=audit.snapshot(dataset))
        dataset.delete()
