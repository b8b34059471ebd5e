"""Prices of a GPU-hour: a pool's own price per class overrides the settings' default."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import IntegrityError, transaction

from scheduling.models import GpuHourPrice
from scheduling.services.pricing import price_book

pytestmark = pytest.mark.django_db


def test_pool_price_overrides_the_default_for_its_class_only(pool, settings) -> None:
    settings.CONSOLE_DEFAULT_GPU_HOUR_PRICES = {"training": "2.50", "inference": "2.00"}
    GpuHourPrice.objects.create(pool=pool, priority_class="training", price=Decimal("3.10"))
    book = price_book([pool.pk])
    assert book.price(pool.pk, "training") == Decimal("3.10")
    assert book.price(pool.pk, "inference") == Decimal("2.00")
    assert book.price(pool.pk, "best-effort") == Decimal(0)  # the setting names no price for it
    assert book.price(pool.pk + 1000, "training") == Decimal("2.50")  # another pool: the default


def test_cost_is_rounded_to_cents(pool) -> None:
    GpuHourPrice.objects.create(pool=pool, priority_class="inference", price=Decimal("1.2345"))
    # 10 GPUs for 1.5 h = 15 GPU-hours; 15 × 1.2345 = 18.5175 → 18.52
    assert price_book().cost(pool.pk, "inference", 15) == Decimal("18.52")


def test_one_price_per_pool_and_class_and_never_negative(pool) -> None:
    GpuHourPrice.objects.create(pool=pool, priority_class="training", price=Decimal("1"))
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuHourPrice.objects.create(pool=pool, priority_class="training", price=Decimal("2"))
    with pytest.raises(IntegrityError), transaction.atomic():
        GpuHourPrice.objects.create(pool=pool, priority_class="inference", price=Decimal("-1"))
