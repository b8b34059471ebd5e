"""Which Celery queue a task goes to: the queue of the site of the fabric it talks to.

A task that talks to a fabric or to a site's hardware (a change's push and verification, a
reconcile, a collector sweep, a BMC power action) runs on a worker *at that fabric's site*, which
consumes ``site.<slug>`` (:attr:`console.fabric.models.Site.queue`); a fabric without a site, and
every task that talks to no fabric (the scheduling tick, notifications, pruning), stays on the
default queue (``CELERY_TASK_DEFAULT_QUEUE``, ``console``). So a site whose workers are down keeps
its own messages waiting in its own queue and never blocks another site's.

:func:`route` is Celery's ``task_routes`` router (``settings.CELERY_TASK_ROUTES``): one place,
used by every publish (``send_task`` by name, ``apply_async``, a retry), that reads the fabric
from the message's arguments. Each task that talks to a fabric registers how to find it
(:func:`register`; the fabric's own tasks here, layers above in their ``AppConfig.ready()``), so
this layer never imports them. The fabric → queue answer is cached per process for
:data:`CACHE_S` seconds and forgotten when a fabric or a site is saved in this process; another
process sees a moved fabric within :data:`CACHE_S` (a message routed to the old queue meanwhile
is published again by the change reaper or a worker's start-up recovery).

Embedded mode (no Redis: one process, one worker thread pool on the default queue) routes
nothing: there is one site's worth of workers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection

from console.fabric.enqueue import APPLY_CHANGE, DISCOVER, RECONCILE

#: How a task's arguments name its fabric: (args, kwargs) → fabric id, or None (default queue).
FabricOf = Callable[[Sequence[Any], Mapping[str, Any]], int | None]

CACHE_S = 10.0
_resolvers: dict[str, FabricOf] = {}
_cache: dict[int | None, tuple[str, float]] = {}
_lock = threading.Lock()


def register(task_name: str, fabric_of: FabricOf) -> None:
    """Route ``task_name`` to the queue of the fabric ``fabric_of`` finds in its arguments
    (registering a name again replaces its entry: a repeated ``ready()`` is harmless)."""
    _resolvers[task_name] = fabric_of


def argument(name: str, position: int | None = None) -> FabricOf:
    """A resolver reading an integer argument: keyword ``name``, else positional ``position``."""

    def read(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
        value = kwargs.get(name)
        if value is None and position is not None and len(args) > position:
            value = args[position]
        return int(value) if value is not None else None

    return read


def default_queue() -> str:
    return str(settings.CELERY_TASK_DEFAULT_QUEUE)


def queue_for_fabric(fabric_id: int | None) -> str:
    """The queue of ``fabric_id``'s site; the default queue for a fabric without a site, one
    reached through its agent, an unknown fabric, or in embedded mode."""
    if fabric_id is None or settings.EMBEDDED:
        return default_queue()
    now = time.monotonic()
    with _lock:
        hit = _cache.get(fabric_id)
    if hit is not None and hit[1] > now:
        return hit[0]
    from console.fabric.models import Fabric  # the models load after the Celery app

    fabric = Fabric.objects.filter(pk=fabric_id).select_related("site").only("driver", "config", "site__slug").first()
    # A fabric reached through its agent needs no worker at its site: any worker pushes through
    # the agent's socket, so its tasks take the default queue.
    slug = fabric.site.slug if fabric is not None and fabric.site is not None and not fabric.through_agent else ""
    queue = f"site.{slug}" if slug else default_queue()
    with _lock:
        _cache[fabric_id] = (queue, now + CACHE_S)
    return queue


def forget(*_: Any, **__: Any) -> None:
    """Drop every cached answer (a fabric or a site was saved or deleted in this process)."""
    with _lock:
        _cache.clear()


def fabric_of_task(name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
    """The fabric a message of task ``name`` talks to, or None (a task of no fabric)."""
    resolver = _resolvers.get(name)
    return resolver(args or (), kwargs or {}) if resolver is not None else None


def route(
    name: str, args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any], task: Any = None, **_: Any
) -> dict[str, str] | None:
    """Celery router: ``{"queue": "site.<slug>"}`` for a task that talks to a fabric of a site,
    else None (Celery then uses the default queue, or the ``queue=`` the caller gave)."""
    if name not in _resolvers or settings.EMBEDDED:
        return None
    try:
        queue = queue_for_fabric(fabric_of_task(name, args, kwargs))
    except OperationalError:
        # A connection the database dropped (a restart, every backend terminated) is replaced
        # once. The router also runs in a task's retry after such an error, where a second
        # failure made Celery reject the message for good and left its change's lease held.
        connection.close_if_unusable_or_obsolete()
        queue = queue_for_fabric(fabric_of_task(name, args, kwargs))
    return {"queue": queue} if queue != default_queue() else None


def _change_fabric(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
    change_id = argument("change_id", 0)(args, kwargs)
    if change_id is None:
        return None
    from console.fabric.models import ChangeRequest

    return ChangeRequest.objects.filter(pk=change_id).values_list("fabric_id", flat=True).first()


register(APPLY_CHANGE, _change_fabric)
register(RECONCILE, argument("fabric_id", 0))
register(DISCOVER, argument("fabric_id"))
