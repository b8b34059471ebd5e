"""How far ahead any time a client gives may lie.

Without a limit, a reservation starting in the year 9999 was accepted (and a time near
``datetime.max`` overflowed into a 500 when a window was added to it). Every time input that
reaches a service is checked here against ``CONSOLE_TIME_HORIZON_DAYS`` (default one year).
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone

from console.tenancy.errors import Invalid


def horizon() -> dt.timedelta:
    return dt.timedelta(days=int(settings.CONSOLE_TIME_HORIZON_DAYS))


def check_within_horizon(field: str, when: dt.datetime | None, *, now: dt.datetime | None = None) -> None:
    """A 400 naming ``field`` when ``when`` lies more than the horizon after ``now``."""
    if when is None:
        return
    limit = (now or timezone.now()) + horizon()
    if when > limit:
        days = horizon().days
        raise Invalid(
            f"{field} is more than {days} days ahead (the limit is {limit:%Y-%m-%d %H:%M} UTC)",
            fields={field: [f"at most {days} days ahead"]},
        )
