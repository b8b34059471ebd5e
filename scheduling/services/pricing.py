"""Prices of a GPU-hour per pool and priority class, and what a request will cost.

One place both the reservation preview ("this will cost …") and the usage report (chargeback) read:
a pool's ``GpuHourPrice`` rows override ``settings.CONSOLE_DEFAULT_GPU_HOUR_PRICES`` per class.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings

from scheduling.models import GpuHourPrice, PriorityClass

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
