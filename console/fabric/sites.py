"""Whether each site's workers are alive and its subnet managers answer: its reachability.

A site's workers (``celery -A console worker -Q site.<slug>``, run at the site) prove they are alive
by writing a heartbeat row per queue they consume (:class:`~console.fabric.models.WorkerHeartbeat`)
every ``SITE_HEARTBEAT_INTERVAL_S`` while connected to the broker (console/celery.py starts
:func:`heartbeat_loop` in every worker). A site is *unreachable* when the heartbeat of its queue is
older than ``SITE_UNREACHABLE_AFTER_S`` (never written counts as older), or when the subnet
manager of one of its fabrics is known not to answer (the layers that watch SMs register a check
here: :func:`register_sm_check`). Its changes then wait in its queue: :func:`reachability` counts
them. The heartbeat lives in PostgreSQL, which every site reaches, so the answer is the same
whether the sites share one Redis or not.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Count, Q
from django.utils import timezone

from console.fabric.agents.services import waiting_for_sm
from console.fabric.models import Fabric, Site, WorkerHeartbeat
from console.fabric.routing import default_queue, queue_for_fabric

log = logging.getLogger(__name__)

#: Fabric ids → why their SM is known down (e.g. "subnet manager state MASTER → NO ANSWER").
SmCheck = Callable[[list[int]], dict[int, str]]
_sm_checks: dict[str, SmCheck] = {}


def register_sm_check(name: str, check: SmCheck) -> None:
    """A layer that watches subnet managers (telemetry) says which fabrics' SMs do not answer;
    keyed by name, so a repeated ``ready()`` replaces its entry."""
    _sm_checks[name] = check


@dataclass(frozen=True)
class SiteStatus:
    """One site as the dashboard and ``/api/sites/`` show it."""

    site_id: int
    name: str
    slug: str
    queue: str
    reachable: bool
    last_seen: dt.datetime | None  # the newest heartbeat of the site's queue (None: never)
    worker: str  # the worker that wrote it
    waiting_changes: int  # changes of the site's fabrics queued, not yet taken by a worker
    sm_down: tuple[str, ...]  # "fabric: why" for each fabric whose SM is known not to answer
    reason: str  # why it is unreachable, in words; "" when reachable

    @property
    def label(self) -> str:
        """``Site B`` (a name that already says "site" is left as it is)."""
        return self.name if self.name.lower().startswith("site") else f"Site {self.name}"

    @property
    def sentence(self) -> str:
        """``Site B unreachable: no worker heartbeat since … 14:02 UTC; 2 changes waiting``."""
        if self.reachable:
            return f"{self.label} reachable"
        waiting = f"{self.waiting_changes} change{'' if self.waiting_changes == 1 else 's'} waiting"
        return f"{self.label} unreachable: {self.reason}; {waiting}"

    def as_dict(self) -> dict[str, Any]:
        """The API's ``reachability`` block of a site (``GET /api/sites/``)."""
        return {
            "reachable": self.reachable,
            "last_seen": self.last_seen.isoformat() if self.last_seen is not None else None,
            "worker": self.worker,
            "waiting_changes": self.waiting_changes,
            "sm_down": list(self.sm_down),
            "reason": self.reason,
        }


def queue_of_site(site: Site) -> str:
    """The queue the site's tasks are routed to (embedded mode: the one default queue)."""
    return default_queue() if settings.EMBEDDED else site.queue


def record_heartbeat(queues: Iterable[str], worker: str, *, now: dt.datetime | None = None) -> None:
    """The workers of ``queues`` are alive (one upsert per queue: workers of one queue race)."""
    at = now or timezone.now()
    rows = [WorkerHeartbeat(queue=q, worker=worker[:200], seen_at=at) for q in sorted(set(queues))]
    WorkerHeartbeat.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["queue"], update_fields=["worker", "seen_at"]
    )


def heartbeat_loop(queues: list[str], worker: str, stop: threading.Event, interval: float) -> None:
    """Write the heartbeat of ``queues`` every ``interval`` seconds until ``stop`` is set (a
    thread of the worker); a failed write (database unreachable) is logged and tried again."""
    try:
        while True:
            try:
                record_heartbeat(queues, worker)
            except Exception as exc:  # the link to PostgreSQL is down: stale is the truth then
                log.warning("site heartbeat of %s not written: %s", ", ".join(queues), exc)
                close_old_connections()
            if stop.wait(interval):
                return
    finally:
        connection.close()  # this thread's own connection


def _sm_down(fabrics: dict[int, str]) -> dict[int, list[str]]:
    """Fabric id → reasons its SM is known down, from every registered check."""
    out: dict[int, list[str]] = {}
    for name, check in _sm_checks.items():
        try:
            found = check(list(fabrics))
        except Exception:
            log.exception("SM check %s failed", name)
            continue
        for fabric_id, why in found.items():
            out.setdefault(fabric_id, []).append(why)
    return out


def _since(seen: dt.datetime | None) -> str:
    return f"no worker heartbeat since {seen:%Y-%m-%d %H:%M} UTC" if seen else "no worker heartbeat ever"


def reachability(*, now: dt.datetime | None = None, threshold_s: float | None = None) -> dict[int, SiteStatus]:
    """Every site's status by site id: reachable, last heartbeat, changes waiting, SMs down."""
    now = now or timezone.now()
    threshold = dt.timedelta(seconds=settings.SITE_UNREACHABLE_AFTER_S if threshold_s is None else threshold_s)
    sites = list(Site.objects.annotate(waiting=Count("fabrics__changes", filter=Q(fabrics__changes__status="queued"))))
    beats = {h.queue: h for h in WorkerHeartbeat.objects.all()}
    placed = list(Fabric.objects.filter(site__isnull=False).only("pk", "name", "site_id", "driver", "config"))
    fabrics = {f.pk: f.name for f in placed}
    site_of = {f.pk: f.site_id for f in placed}
    # sites whose every fabric is reached through its agent: no worker of their own is needed
    by_agents = {f.site_id for f in placed} - {f.site_id for f in placed if not f.through_agent}
    down = _sm_down(fabrics)
    for fabric_id, why in waiting_for_sm(f.pk for f in placed if f.through_agent).items():
        down.setdefault(fabric_id, [why])
    out: dict[int, SiteStatus] = {}
    for site in sites:
        queue = queue_of_site(site)
        beat = beats.get(queue)
        seen = beat.seen_at if beat is not None else None
        sm = tuple(sorted(f"{fabrics[f]}: {'; '.join(why)}" for f, why in down.items() if site_of.get(f) == site.pk))
        reasons = []
        # a site whose fabrics are all reached through agents is reached through them, not
        # through a worker of its own (its agents' state is in ``sm``)
        if site.pk not in by_agents and (seen is None or now - seen > threshold):
            reasons.append(_since(seen))
        if sm:
            reasons.append("subnet manager not answering (" + ", ".join(sm) + ")")
        out[site.pk] = SiteStatus(
            site_id=site.pk,
            name=site.name,
            slug=site.slug,
            queue=queue,
            reachable=not reasons,
            last_seen=seen,
            worker=beat.worker if beat is not None else "",
            waiting_changes=int(getattr(site, "waiting", 0)),
            sm_down=sm,
            reason="; ".join(reasons),
        )
    return out


def unreachable() -> list[SiteStatus]:
    """The sites that are unreachable now, by name (the dashboard's banner)."""
    return sorted((s for s in reachability().values() if not s.reachable), key=lambda s: s.name)


def heartbeat_stale(fabric_id: int, *, now: dt.datetime | None = None) -> bool:
    """Whether ``fabric_id`` belongs to a site whose workers' heartbeat is stale: its messages
    wait in its queue (and a worker starting there republishes what is left to do), so
    publishing them again meanwhile only piles up duplicates."""
    site = Site.objects.filter(fabrics__id=fabric_id).first()
    if site is None or queue_for_fabric(fabric_id) == default_queue():
        return False  # (no site, or reached through its agent: any worker takes its tasks)
    seen = WorkerHeartbeat.objects.filter(queue=queue_of_site(site)).values_list("seen_at", flat=True).first()
    threshold = dt.timedelta(seconds=settings.SITE_UNREACHABLE_AFTER_S)
    return seen is None or (now or timezone.now()) - seen > threshold
