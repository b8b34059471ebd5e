"""Power actions on nodes: every write goes through here (the API, the policy and the CLI call
these; the Celery task only runs :func:`drive`).

A power-off is refused while a reservation needs the node: an allocation of a holding or
requested reservation overlapping ``[now, now + boot time + margin)`` (the node could not be
back in time). The check and the change to ``powering-off`` run in one transaction under the
reservation lock of the node's pools, the lock reserve and the queue pass take before they place
(``scheduling.services.locks.node_for_update``): a reservation either commits first (the power-off then sees it
and is refused) or waits until the node is ``powering-off`` (and placement passes over it).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from celery import current_app as celery_app
from django.db import transaction
from django.utils import timezone

from console.power import lab
from console.power.drivers import BmcError, driver_for
from console.power.models import Bmc, PowerEvent
from console.power.signals import power_state_changed
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid, NotFound
from scheduling.models import Node, Reservation, ReservationAllocation
from scheduling.services import notices
from scheduling.services.locks import node_for_update
from scheduling.services.power import node_boot_seconds

log = logging.getLogger(__name__)

#: slack on top of a node's boot time before a reservation's start (BIOS, fabric, P_Key)
MARGIN = dt.timedelta(minutes=5)
#: reservations that may still use their allocations (queued ones hold none)
NEEDING = (*Reservation.HOLDING, Reservation.Status.REQUESTED, Reservation.Status.ENDING)

ON, OFF = Node.Power.ON, Node.Power.OFF
POWERING_ON, POWERING_OFF, FAILED = Node.Power.POWERING_ON, Node.Power.POWERING_OFF, Node.Power.FAILED
#: what a power task returns for a node deleted meanwhile
GONE = "gone"


class NodeNeeded(Conflict):
    """A reservation will use the node before it could boot again."""

    code = "node_needed"


@dataclass(frozen=True)
class Action:
    """What :func:`drive` asks of a BMC: ``on``, ``off`` (graceful) or ``force-off``."""

    name: str

    @property
    def target(self) -> str:
        return ON if self.name == "on" else OFF


ACTIONS = ("on", "off", "force-off")


def boot_time(node: Node) -> dt.timedelta:
    """The node type's boot time from its fabric's design catalogue (as placement reads it)."""
    return dt.timedelta(seconds=node_boot_seconds(node))


def needing_reservations(node: Node, now: dt.datetime) -> list[int]:
    """Reservations holding ``node`` somewhere in ``[now, now + boot + margin)``."""
    horizon = now + boot_time(node) + MARGIN
    rows = ReservationAllocation.objects.filter(
        node=node, start__lt=horizon, end__gt=now, reservation__status__in=NEEDING
    ).values_list("reservation_id", flat=True)
    return sorted(set(rows))


def _actor_name(actor: Actor) -> str:
    return actor.label[:200]


def _change(node: Node, to: str, *, actor: str, reason: str, intended: bool, now: dt.datetime) -> PowerEvent:
    """Record ``node`` going to ``to`` (inside the caller's transaction); the signal after commit."""
    event = PowerEvent.objects.create(
        node=node, from_state=node.power_state, to_state=to, at=now, intended=intended, actor=actor, reason=reason[:300]
    )
    node.power_state, node.power_changed_at = to, now
    node.save(update_fields=["power_state", "power_changed_at"])
    node_id = node.pk

    def tell() -> None:  # robustly: the state is committed; a receiver's failure is logged
        for receiver, answer in power_state_changed.send_robust(sender=Node, node_id=node_id, state=to):
            if isinstance(answer, Exception):
                log.error("power_state_changed receiver %r failed", receiver, exc_info=answer)

    transaction.on_commit(tell, robust=True)
    return event


DRIVE, POLL = "power.drive", "power.poll"
#: seconds between two status reads of a transition (each read is its own short task)
POLL_INTERVAL_S = 2.0

#: ``requeue(node_id, action, deadline)``: read the BMC again later (the default publishes ``power.poll``)
Requeue = Callable[[int, str, float], None]


def _enqueue(node_id: int, action: str) -> None:
    """After commit, publish ``power.drive`` by name (console.power.tasks runs it)."""
    transaction.on_commit(lambda: _publish(node_id, action))


def _publish(node_id: int, action: str) -> None:
    try:
        celery_app.send_task(DRIVE, args=[node_id, action], ignore_result=True)
    except Exception:  # the row is committed; an operator retries (see docs/operations.md)
        log.exception("could not enqueue %s for node %s", DRIVE, node_id)


def _publish_poll(node_id: int, action: str, deadline: float) -> None:
    """Publish ``power.poll`` to run in :data:`POLL_INTERVAL_S` (lost: the reaper marks the node failed)."""
    try:
        celery_app.send_task(POLL, args=[node_id, action, deadline], countdown=POLL_INTERVAL_S, ignore_result=True)
    except Exception:
        log.exception("could not enqueue %s for node %s", POLL, node_id)


def _bmc_of(node: Node) -> Bmc:
    bmc = Bmc.objects.filter(node=node).first()
    if bmc is None:
        raise Invalid(f"node {node.name} has no BMC configured", code="no_bmc")
    return bmc


def power_on(node_id: int, *, actor: Actor, reason: str = "", enqueue: bool = True) -> Node:
    """Start booting a node: ``powering-on`` now, the BMC call and polling in a task."""
    with transaction.atomic():
        node = _locked(node_id)
        _bmc_of(node)
        if node.power_state in (ON, POWERING_ON):
            raise Conflict(f"node {node.name} is already {node.power_state}", code="power_state")
        if node.power_state == POWERING_OFF:  # its shutdown may be under way: an "on" now could settle
            raise Conflict(  # on a node that then halts; power it on once it is off
                f"node {node.name} is powering off; power it on once it is off", code="power_in_progress"
            )
        before = {"power_state": node.power_state}
        _change(node, POWERING_ON, actor=_actor_name(actor), reason=reason, intended=True, now=timezone.now())
        audit.record(actor, "node.power_on", node, before=before, after={"power_state": POWERING_ON, "reason": reason})
        if enqueue:
            _enqueue(node.pk, "on")
    return node


def power_off(node_id: int, *, actor: Actor, reason: str = "", force: bool = False, enqueue: bool = True) -> Node:
    """Start powering a node off (graceful, or ``force``: ForceOff) unless a reservation needs it
    (:class:`NodeNeeded`, a 409); the check and the state change share one transaction under
    the node's row lock."""
    with transaction.atomic():
        node = _locked(node_id)
        _bmc_of(node)
        if node.power_state in (OFF, POWERING_OFF):
            raise Conflict(f"node {node.name} is already {node.power_state}", code="power_state")
        if node.power_state == POWERING_ON and not force:
            raise Conflict(
                f"node {node.name} is booting; power it off once it is on (or force it off)", code="power_in_progress"
            )
        now = timezone.now()
        needed = needing_reservations(node, now)
        if needed:
            raise NodeNeeded(
                f"node {node.name} is needed by reservation(s) {', '.join(map(str, needed))} within its boot time"
                f" plus margin ({int((boot_time(node) + MARGIN).total_seconds())} s); not powering it off",
                fields={"reservations": needed},
            )
        before = {"power_state": node.power_state}
        _change(node, POWERING_OFF, actor=_actor_name(actor), reason=reason, intended=True, now=now)
        audit.record(
            actor,
            "node.power_off",
            node,
            before=before,
            after={"power_state": POWERING_OFF, "force": force, "reason": reason},
        )
        if enqueue:
            _enqueue(node.pk, "force-off" if force else "off")
    return node


#: A failed node that waiting reservations need is powered on again at most this many times, the
#: n-th retry WAKE_BACKOFF_S · 2^(n-1) after the last failure; then it stays failed (an operator's
#: turn) and each waiting reservation hears of it once (``reservation.fabric_fault``, node_down).
WAKE_RETRIES = 2
WAKE_BACKOFF_S = 60.0


def failed_boots(node: Node) -> tuple[int, int | None]:
    """Power-ons of ``node`` that ended ``failed`` since it was last on, and the last one's event."""
    count, last = 0, None
    history = PowerEvent.objects.filter(node=node).order_by("-at", "-pk").values_list("pk", "from_state", "to_state")
    for pk, from_state, to_state in history[:100]:
        if to_state == ON:
            break
        if from_state == POWERING_ON and to_state == FAILED:
            count, last = count + 1, last or pk
    return count, last


def wake(
    node_ids: list[int],
    *,
    reason: str,
    reservation_ids: Iterable[int] = (),
    actor: Actor | None = None,
    now: dt.datetime | None = None,
) -> list[int]:
    """Power on those of ``node_ids`` that are off or failed and have a BMC (for the reservations
    ``reservation_ids`` waiting on them: a receiver of scheduling's ``power_wanted`` calls this);
    nodes already on or booting, or without a BMC, are skipped, and so is a failed node whose
    retries (:data:`WAKE_RETRIES`, with backoff) are used up or not due yet: once used up, the
    reservations are told. Returns the nodes it started booting."""
    actor = actor or Actor.system("scheduling")
    now = now or timezone.now()
    started: list[int] = []
    candidates = Node.objects.filter(pk__in=node_ids, power_state__in=(OFF, FAILED), bmc__isnull=False)
    for node in candidates.order_by("pk"):
        failures, failure = failed_boots(node) if node.power_state == FAILED else (0, None)
        if failures > WAKE_RETRIES and failure is not None:
            with transaction.atomic():
                notices.power_failed(reservation_ids, node, failures, failure)
            continue
        since = node.power_changed_at
        if failures and since is not None and now < since + dt.timedelta(seconds=WAKE_BACKOFF_S * 2 ** (failures - 1)):
            continue
        why = reason if not failures else f"{reason}; retry {failures} of {WAKE_RETRIES} after a failed power-on"
        try:
            power_on(node.pk, actor=actor, reason=why)
        except (Conflict, Invalid):  # it changed meanwhile (another wake, an operator)
            continue
        started.append(node.pk)
    return started


def _locked(node_id: int) -> Node:
    try:
        return node_for_update(node_id)
    except Node.DoesNotExist as exc:
        raise NotFound("no such node") from exc


def drive(node_id: int, action: str, *, timeout_s: float | None = None, requeue: Requeue | None = None) -> str:
    """The ``power.drive`` task's body: send ``action`` to the node's BMC, then :func:`poll` once
    (which re-queues itself until the BMC reports the target or the deadline passes: the node
    type's boot time plus margin from the ``powering-*`` change, or ``timeout_s``). A BMC error
    records ``failed`` (not intended). Idempotent: a node no longer in the matching transition (a
    newer action superseded this one, the reaper gave up) is left alone. Returns the state."""
    act = Action(action)
    expected = POWERING_ON if act.target == ON else POWERING_OFF
    node = Node.objects.filter(pk=node_id).first()
    if node is None or node.power_state != expected:
        return node.power_state if node is not None else GONE
    limit = timeout_s if timeout_s is not None else (boot_time(node) + MARGIN).total_seconds()
    began = node.power_changed_at or timezone.now()
    deadline = began.timestamp() + limit
    try:
        driver = driver_for(_bmc_of(node))
        {"on": driver.power_on, "off": driver.graceful_off, "force-off": driver.force_off}[act.name]()
    except (BmcError, Invalid) as exc:
        return _settle(node_id, expected, FAILED, f"{act.name}: {exc}")
    return poll(node_id, action, deadline, requeue=requeue)


def poll(node_id: int, action: str, deadline: float, *, requeue: Requeue | None = None) -> str:
    """One status read of a transition (the ``power.poll`` task's body, and :func:`drive`'s
    first): the target reached records ``on``/``off``; past ``deadline`` (epoch seconds)
    ``failed``; else ``requeue`` reads again later. A node the reaper already gave up on
    (``failed`` from this transition) still has a late answer recorded. Returns the state."""
    act = Action(action)
    expected = POWERING_ON if act.target == ON else POWERING_OFF
    node = Node.objects.filter(pk=node_id).first()
    if node is None:
        return GONE
    late = node.power_state == FAILED and _gave_up_on(node, expected)
    if node.power_state != expected and not late:
        return node.power_state
    try:
        seen = driver_for(_bmc_of(node)).status()
    except (BmcError, Invalid) as exc:
        return node.power_state if late else _settle(node_id, expected, FAILED, f"{act.name}: {exc}")
    if seen == act.target:
        # the HCAs go dark with the host and come up as it boots (a lab fabric: its cables in ibsim)
        lab.set_links(node, up=act.target == ON, actor=Actor.system("bmc"))
        return _settle(node_id, expected, act.target, f"the BMC reports {seen}")
    if late:
        return node.power_state
    if time.time() >= deadline:
        return _settle(node_id, expected, FAILED, f"{act.name}: the BMC still reports {seen!r} at the deadline")
    (requeue or _publish_poll)(node_id, action, deadline)
    return expected


def interrupted(node_id: int, action: str, deadline: float | None, *, requeue: Requeue | None = None) -> str:
    """A ``power.*`` task hit its soft time limit (a BMC call that hung): read again later while
    the deadline is ahead, else record ``failed``."""
    act = Action(action)
    expected = POWERING_ON if act.target == ON else POWERING_OFF
    if deadline is None:  # the drive task: the transition's own deadline, as drive computes it
        node = Node.objects.filter(pk=node_id).first()
        if node is not None and node.power_changed_at is not None:
            deadline = node.power_changed_at.timestamp() + (boot_time(node) + MARGIN).total_seconds()
    if deadline is not None and time.time() < deadline:
        (requeue or _publish_poll)(node_id, action, deadline)
        return expected
    return _settle(node_id, expected, FAILED, f"{act.name}: the BMC did not answer within the task's time limit")


def _gave_up_on(node: Node, expected: str) -> bool:
    """``node`` is ``failed`` because its transition from ``expected`` was given up (the reaper,
    a missed deadline): a BMC answer now is late, not unrelated."""
    last = PowerEvent.objects.filter(node=node).order_by("-at", "-pk").first()
    return last is not None and last.from_state == expected and last.to_state == FAILED


def _settle(node_id: int, expected: str, to: str, reason: str) -> str:
    """Record the end of the transition from ``expected`` (``to``: ``on``/``off``/``failed``); a
    BMC answer after the transition was given up (``failed``) is recorded too, as a late one."""
    with transaction.atomic():
        node = node_for_update(node_id)
        late = to != FAILED and node.power_state == FAILED and _gave_up_on(node, expected)
        if node.power_state != expected and not late:
            return node.power_state
        if late:
            reason = f"late answer after the transition was given up: {reason}"
        _change(node, to, actor="bmc", reason=reason, intended=to != FAILED, now=timezone.now())
        action = "node.power_failed" if to == FAILED else "node.power_settled"
        audit.record(Actor.system("bmc"), action, node, after={"power_state": to, "reason": reason})
    if to == FAILED:
        log.warning("node %s power action failed: %s", node_id, reason)
    return to


#: on top of a transition's own time limit before the reaper calls it failed
REAP_SLACK = dt.timedelta(minutes=1)


def reap_stuck(now: dt.datetime | None = None) -> list[int]:
    """Nodes left ``powering-on``/``powering-off`` longer than their boot time + margin + slack (a
    lost ``power.drive`` message, a worker that died mid-poll) become ``failed`` (not intended),
    so an operator sees them and acts; a late task then finds the node settled and does
    nothing. Returns the node ids."""
    now = now or timezone.now()
    reaped: list[int] = []
    moving = Node.objects.filter(power_state__in=(POWERING_ON, POWERING_OFF), power_changed_at__isnull=False)
    for node in moving.order_by("pk"):
        assert node.power_changed_at is not None
        if node.power_changed_at + boot_time(node) + MARGIN + REAP_SLACK < now:
            reason = f"no BMC answer recorded since {node.power_changed_at:%Y-%m-%d %H:%M:%S} UTC"
            if _settle(node.pk, node.power_state, FAILED, reason) == FAILED:
                reaped.append(node.pk)
    return reaped


def check_address(driver: str, address: str) -> None:
    """A BMC address carries no credentials: no ``user:password@``, and no query or fragment
    (``?password=…``): they would end up in logs and audit rows, and bypass the encrypted
    password. A Redfish base URL and an IPMI host[:port] need neither."""
    host = urlsplit(address).netloc if "//" in address else address
    if "@" in host or "?" in address or "#" in address:
        raise Invalid(
            "a BMC address must not contain credentials (user:password@, ?password=…); "
            "set username and password instead",
            code="bmc_address",
            fields={"address": "no user:password@, query or fragment in the address"},
        )
    if driver == Bmc.Driver.REDFISH and not address.startswith(("http://", "https://")):
        raise Invalid(
            "a Redfish BMC's address is a URL (https://host[:port])",
            code="bmc_address",
            fields={"address": "https://host[:port]"},
        )


def set_bmc(node_id: int, *, actor: Actor, data: dict[str, Any]) -> Bmc:
    """Create or change a node's BMC; ``password`` is stored encrypted (absent: kept, unless the
    driver or address changes: then the stored password must be entered again, or it would be
    sent to a new, perhaps hostile, endpoint)."""
    with transaction.atomic():
        node = _locked(node_id)
        bmc = Bmc.objects.filter(node=node).first()
        before = audit.snapshot(bmc) if bmc is not None else None
        driver = data.get("driver", bmc.driver if bmc is not None else Bmc.Driver.REDFISH)
        address = data.get("address", bmc.address if bmc is not None else "")
        check_address(driver, address)
        moved = bmc is not None and (bmc.address, bmc.driver) != (address, driver)
        if moved and bmc is not None and bmc.password_encrypted and not data.get("password"):
            raise Invalid(
                "changing a BMC's address or driver needs its password again",
                code="password_required",
                fields={"password": "required when the address or driver changes"},
            )
        bmc = bmc or Bmc(node=node)
        for field in ("driver", "address", "username", "system_id", "verify_tls"):
            if field in data:
                setattr(bmc, field, data[field])
        if "password" in data:
            bmc.password = data["password"]
        bmc.save()
        audit.record(actor, "node.bmc_set", bmc, before=before, after=audit.snapshot(bmc))
    return bmc
