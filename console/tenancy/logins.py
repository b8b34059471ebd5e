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
    """A username or a client address whose failed logins reached the limit."""

    kind: str  # "username" | "ip_address"
    value: str
    failures: int
    last_failure: dt.datetime
    unlocks_at: dt.datetime | None


def cool_off() -> dt.timedelta | None:
    hours = settings.AXES_COOLOFF_TIME
    return dt.timedelta(hours=float(hours)) if hours else None


def locked_logins() -> list[LockedLogin]:
    """Every username and every client address locked out now (failures within the cool-off at
    or above the limit), the most recent first."""
    period = cool_off()
    attempts = AccessAttempt.objects.all()
    if period is not None:
        attempts = attempts.filter(attempt_time__gte=timezone.now() - period)
    locked: list[LockedLogin] = []
    for kind in ("username", "ip_address"):
        rows = (
            # (no exclude(ip_address=""): the inet field turns "" into NULL and the exclude into all)
            attempts.exclude(**{f"{kind}__isnull": True})
            .order_by()  # the model's ordering would split the groups
            .values(kind)
            .annotate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
            .filter(failures__gte=settings.AXES_FAILURE_LIMIT)
        )
        for row in rows:
            if not row[kind]:
                continue
            last: dt.datetime = row["last"]
            locked.append(
                LockedLogin(kind, str(row[kind]), int(row["failures"]), last, last + period if period else None)
            )
    return sorted(locked, key=lambda item: item.last_failure, reverse=True)


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
