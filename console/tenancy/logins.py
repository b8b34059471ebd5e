"""Login lockouts (django-axes): which usernames and client addresses are locked now, and the
audit row of each lockout. Unlocking is a tenancy action (``actions.unlock_login``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from axes.models import AccessAttempt
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Sum
from django.http import HttpRequest
from django.utils import timezone

from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.models import Membership

LOGIN_GUARD = Actor.system("login guard")


@dataclass(frozen=True)
class LockedLogin:
    """A username locked out from one client address, or an address throttled (many failures)."""

    kind: str  # "username" | "ip_address"
    value: str
    failures: int
    last_failure: dt.datetime
    unlocks_at: dt.datetime | None
    address: str = ""  # for a username: the address it is locked from


def cool_off() -> dt.timedelta | None:
    hours = settings.AXES_COOLOFF_TIME
    return dt.timedelta(hours=float(hours)) if hours else None


def _recent() -> Any:
    period = cool_off()
    attempts = AccessAttempt.objects.all()
    if period is not None:
        attempts = attempts.filter(attempt_time__gte=timezone.now() - period)
    return attempts


def address_failures(ip_address: str | None) -> int:
    """Failed logins from ``ip_address`` within the cool-off, whatever the username."""
    if not ip_address:
        return 0
    total = _recent().filter(ip_address=ip_address).aggregate(n=Sum("failures_since_start"))["n"]
    return int(total or 0)


def address_throttled(ip_address: str | None) -> bool:
    """True when the address has reached ``CONSOLE_LOGIN_ADDRESS_LIMIT`` failed logins."""
    return address_failures(ip_address) >= settings.CONSOLE_LOGIN_ADDRESS_LIMIT


def locked_logins() -> list[LockedLogin]:
    """Every username locked out from an address and every address throttled now (failures
    within the cool-off at or above the limits), the most recent first."""
    period = cool_off()
    attempts = _recent()
    locked: list[LockedLogin] = []
    # (no exclude(ip_address=""): the inet field turns "" into NULL and the exclude into all)
    pairs = (
        attempts.exclude(username__isnull=True)
        .order_by()  # the model's ordering would split the groups
        .values("username", "ip_address")
        .annotate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
        .filter(failures__gte=settings.AXES_FAILURE_LIMIT)
    )
    for row in pairs:
        if row["username"]:
            last: dt.datetime = row["last"]
            until = last + period if period else None
            locked.append(
                LockedLogin(
                    "username", row["username"], int(row["failures"]), last, until, str(row["ip_address"] or "")
                )
            )
    addresses = (
        attempts.exclude(ip_address__isnull=True)
        .order_by()
        .values("ip_address")
        .annotate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
        .filter(failures__gte=settings.CONSOLE_LOGIN_ADDRESS_LIMIT)
    )
    for row in addresses:
        last = row["last"]
        locked.append(
            LockedLogin(
                "ip_address", str(row["ip_address"]), int(row["failures"]), last, last + period if period else None
            )
        )
    return sorted(locked, key=lambda item: item.last_failure, reverse=True)


def record_throttle(request: HttpRequest, ip_address: str | None) -> None:
    """Audit an address once, when its failure that reaches the address limit is recorded."""
    if address_failures(ip_address) != settings.CONSOLE_LOGIN_ADDRESS_LIMIT:
        return
    with transaction.atomic():
        audit.record(
            LOGIN_GUARD,
            "login.throttle",
            object_type="login",
            object_id=(ip_address or "")[:64],
            object_repr=f"address {ip_address}",
            after={"ip_address": ip_address, "failures": settings.CONSOLE_LOGIN_ADDRESS_LIMIT},
        )


def record_lockout(sender: Any, request: HttpRequest, username: str | None, ip_address: str | None, **_: Any) -> None:
    """Audit a lockout once, when the failure that reached the limit is recorded (axes signals
    ``user_locked_out`` again for refused attempts during the lockout; those carry no count)."""
    failures = getattr(request, "axes_failures_since_start", None)
    if failures is None or failures != settings.AXES_FAILURE_LIMIT:
        return
    membership = Membership.objects.filter(user__username=username).first() if username else None
    with transaction.atomic():
        audit.record(
            LOGIN_GUARD,
            "login.lockout",
            object_type="login",
            object_id=(username or ip_address or "")[:64],
            object_repr=f"{username or '?'} from {ip_address or '?'}",
            after={"username": username, "ip_address": ip_address, "failures": failures},
            tenant_id=membership.tenant_id if membership is not None else None,
        )
