"""The e-mail of an event, through Django's e-mail backend (the console backend in the demo)."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail

from console.notify.models import Event
from console.notify.services import recipients

SUBJECTS = {
    "reservation.ready": "is ready",
    "reservation.expiring": "ends soon",
    "reservation.preempted": "was preempted",
    "reservation.failed": "failed",
    "reservation.placed": "was placed",
    "reservation.fabric_fault": "is affected by a fabric fault",
}


def render(event: Event) -> tuple[str, str]:
    """Subject and plain-text body: what happened, the reservation's window in UTC, the payload."""
    data = event.payload["data"]
    res = data["reservation"]
    label = res["name"] or f"#{res['id']}"
    subject = f"[IB console] Reservation {label} {SUBJECTS.get(event.type, event.type)}"
    lines = [
        f"Reservation {label} ({res['gpus']} GPUs in pool {res['pool']}) {SUBJECTS.get(event.type, event.type)}.",
        f"Window: {res['start']} to {res['end']} (UTC).",
    ]
    detail = {k: v for k, v in data.items() if k != "reservation"}
    lines += [f"{key}: {value}" for key, value in sorted(detail.items())]
    lines += ["", f"Event {event.pk} ({event.type}).", "Change what you receive on the Notifications page."]
    return subject, "\n".join(lines)


def send_event_mail(event_id: str) -> int:
    """Send the event to the members who want it; returns how many messages were sent."""
    event = Event.objects.get(pk=event_id)
    to = recipients(event.tenant_id, event.owner_user_id)
    if not to or "reservation" not in event.payload["data"]:
        return 0
    subject, body = render(event)
    # one message per recipient: members do not learn each other's addresses
    return sum(send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [address]) for address in to)
