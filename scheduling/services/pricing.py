"""Prices of a GPU-hour per pool and priority class, and what a request will cost.

One place both the reservation preview ("this will cost …") and the usage report (chargeback) read:
a pool's ``GpuHourPrice`` rows override ``settings.CONSOLE_DEFAULT_GPU_HOUR_PRICES`` per class.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.conf import settings
from django.db import transaction

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Invalid
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator
from scheduling.models import GpuHourPrice, Pool, PriorityClass
from scheduling.services.locks import pool_for_update

CENT = Decimal("0.01")


@dataclass(frozen=True)
class PriceBook:
    """Every price a report or preview needs, loaded in one query."""

    overrides: dict[tuple[int, str], Decimal]
    defaults: dict[str, Decimal]
    currency: str

    def price(self, pool_id: int, priority_class: str) -> Decimal:
        """Price of one GPU-hour of ``priority_class`` in pool ``pool_id``."""
        found = self.overrides.get((pool_id, priority_class))
        if found is not None:
            return found
        return self.defaults.get(priority_class, Decimal(0))

    def cost(self, pool_id: int, priority_class: str, gpu_hours: float | Decimal) -> Decimal:
        """``gpu_hours`` at the pool's price for the class, rounded to cents."""
        amount = Decimal(str(gpu_hours)) * self.price(pool_id, priority_class)
        return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def default_prices() -> dict[str, Decimal]:
    """The settings' price per class (classes the setting omits cost nothing)."""
    configured: dict[str, str] = settings.CONSOLE_DEFAULT_GPU_HOUR_PRICES
    return {cls.value: Decimal(str(configured.get(cls.value, "0"))) for cls in PriorityClass}


def price_book(pool_ids: Iterable[int] | None = None) -> PriceBook:
    """Prices for ``pool_ids`` (every pool when None)."""
    rows = GpuHourPrice.objects.all()
    if pool_ids is not None:
        rows = rows.filter(pool_id__in=list(pool_ids))
    overrides = {(row.pool_id, row.priority_class): row.price for row in rows}
    return PriceBook(overrides=overrides, defaults=default_prices(), currency=settings.CONSOLE_CURRENCY)


def pool_prices(pool: Pool) -> list[dict[str, Any]]:
    """Every class's price in ``pool``: its own (``overridden``) or the settings' default."""
    book = price_book([pool.pk])
    return [
        {
            "priority_class": cls.value,
            "price": book.price(pool.pk, cls.value),
            "default": book.defaults[cls.value],
            "overridden": (pool.pk, cls.value) in book.overrides,
        }
        for cls in PriorityClass
    ]


def set_prices(actor: Actor, principal: Principal, pool: Pool, prices: Mapping[str, Decimal | None]) -> Pool:
    """Set (a price) or clear (None: back to the default) the pool's GPU-hour price per class;
    operators only, audited as one ``pool.prices`` entry with the prices before and after."""
    require_operator(principal, to="set GPU-hour prices")
    unknown = sorted(set(prices) - set(PriorityClass.values))
    if unknown:
        raise Invalid("unknown priority class", fields={c: ["not a priority class"] for c in unknown})
    negative = sorted(c for c, p in prices.items() if p is not None and p < 0)
    if negative:
        raise Invalid("a price cannot be negative", fields={c: ["negative"] for c in negative})
    with transaction.atomic():
        pool = pool_for_update(pool.pk)
        before = _own_prices(pool)
        for cls, price in prices.items():
            if price is None:
                GpuHourPrice.objects.filter(pool=pool, priority_class=cls).delete()
            else:
                GpuHourPrice.objects.update_or_create(pool=pool, priority_class=cls, defaults={"price": price})
        audit.record(actor, "pool.prices", pool, before={"prices": before}, after={"prices": _own_prices(pool)})
    return pool


def _own_prices(pool: Pool) -> dict[str, str]:
    return {row.priority_class: str(row.price) for row in GpuHourPrice.objects.filter(pool=pool)}
