"""``/metrics`` in Prometheus text format: per-link rates, states and error counters, the subnet
manager's state, the collector's freshness, reservations and GPUs per tenant, quota usage,
partition push outcomes and each pool's energy over the last 24 hours, so existing Prometheus
and Grafana setups can scrape the console.

Conventions (those of the InfiniBand exporters, checked by ``promtool check metrics`` in the
tests): every family has HELP and TYPE, base units in the name (``_bytes_per_second``,
``_seconds``, ``_ratio``), counters end in ``_total``, and labels stay low-cardinality: fabric,
link, tenant slug, pool and small enums — never a user, a reservation id or a GUID. The reference
of every family is ``docs/api.md`` (/metrics); the dashboard and alert rules built on them are in
``deploy/``.
"""

from __future__ import annotations

import datetime as dt
import hmac
from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import Count, Sum
from django.http import HttpRequest
from django.utils import timezone

from console.fabric.models import ChangeRequest, Fabric
from console.power.energy import EnergyQuery, energy
from console.telemetry import store
from console.telemetry.models import FabricEvent
from console.telemetry.services import FAILED_PUSH
from console.tenancy.models import Principal
from scheduling.models import Quota, Reservation
from scheduling.power.energy import JOULES_PER_KWH
from scheduling.services.quotas import quota_usages

#: One sample: its labels and its value.
Sample = tuple[dict[str, object], float]


def metrics_allowed(request: HttpRequest, token: str) -> bool:
    """An operator/auditor session, or ``Authorization: Bearer <METRICS_TOKEN>``."""
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header[7:].strip(), token)
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated and Principal.of(user).sees_all_tenants)


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def family(name: str, kind: str, help_text: str, samples: Iterable[Sample]) -> Iterator[str]:
    """One metric family: HELP, TYPE, then a line per sample (HELP and TYPE even without samples,
    so a scrape always documents every family)."""
    yield f"# HELP {name} {help_text}"
    yield f"# TYPE {name} {kind}"
    for labels, value in samples:
        inner = ",".join(f'{key}="{_label(val)}"' for key, val in labels.items())
        yield f"{name}{{{inner}}} {_number(value)}"


def _snapshots() -> list[tuple[str, dict[str, Any]]]:
    rows = []
    for fabric in Fabric.objects.only("pk", "name").order_by("name"):
        snap = store.load_snapshot(fabric.pk)
        if snap:
            rows.append((fabric.name, snap))
    return rows


def _links(rows: list[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    def per_link(pick: Any) -> Iterator[Sample]:
        for name, snap in rows:
            for lid, st in snap["links"].items():
                yield {"fabric": name, "link": lid}, pick(st)

    yield from family(
        "ibc_link_tx_bytes_per_second",
        "gauge",
        "Bytes per second leaving the measuring switch port of the link (the collector's last sweep).",
        per_link(lambda st: st["tx_bps"] / 8),
    )
    yield from family(
        "ibc_link_rx_bytes_per_second",
        "gauge",
        "Bytes per second arriving at the measuring switch port of the link (the collector's last sweep).",
        per_link(lambda st: st["rx_bps"] / 8),
    )
    yield from family(
        "ibc_link_utilisation_ratio",
        "gauge",
        "Busier direction of the link as a fraction of its line rate (0 to 1).",
        per_link(lambda st: st["util"]),
    )
    yield from family(
        "ibc_link_up",
        "gauge",
        "1 when the link is up (LinkUp, Active), 0 when down.",
        per_link(lambda st: int(st["up"])),
    )
    yield from family(
        "ibc_link_errors_total",
        "counter",
        "PortCounters error counter of the link's measuring port (counter = the PortCounters field); "
        "only non-zero counters are exposed.",
        (
            ({"fabric": name, "link": lid, "counter": counter}, value)
            for name, snap in rows
            for lid, st in snap["links"].items()
            for counter, value in sorted((st.get("error_totals") or {}).items())
        ),
    )


def _collector(rows: list[tuple[str, dict[str, Any]]]) -> Iterator[str]:
    yield from family(
        "ibc_collector_cycle_seconds",
        "gauge",
        "Duration of the collector's last sweep of the fabric.",
        (({"fabric": name}, snap.get("cycle_s", 0)) for name, snap in rows),
    )
    yield from family(
        "ibc_collector_last_sweep_timestamp_seconds",
        "gauge",
        "Unix time of the collector's last sweep of the fabric (staleness: time() minus this).",
        (({"fabric": name}, snap.get("at", 0)) for name, snap in rows),
    )
    yield from family(
        "ibc_sm_state_info",
        "gauge",
        "The subnet manager's state as SMInfo reports it (MASTER, STANDBY, ... or NO ANSWER); always 1.",
        (({"fabric": name, "state": snap["sm"]["state"]}, 1) for name, snap in rows if snap.get("sm", {}).get("state")),
    )


def _fabric_rows() -> Iterator[str]:
    events = FabricEvent.objects.values("fabric__name", "kind", "status").annotate(n=Count("id")).order_by()
    yield from family(
        "ibc_fabric_events",
        "gauge",
        "Fabric events (alarms) by kind and status.",
        (({"fabric": r["fabric__name"], "kind": r["kind"], "status": r["status"]}, r["n"]) for r in events),
    )
    changes = ChangeRequest.objects.values("fabric__name", "status").annotate(n=Count("id")).order_by()
    yield from family(
        "ibc_change_requests",
        "gauge",
        "Partition change requests (pushes to the fabric) by status.",
        (({"fabric": r["fabric__name"], "status": r["status"]}, r["n"]) for r in changes),
    )
    failed = dict(
        ChangeRequest.objects.filter(status__in=FAILED_PUSH)
        .values("fabric_id")
        .annotate(n=Count("id"))
        .values_list("fabric_id", "n")
    )
    yield from family(
        "ibc_partition_push_failures_total",
        "counter",
        "Partition pushes that failed or were rolled back, since the fabric was added.",
        (
            ({"fabric": name}, failed.get(pk, 0))
            for pk, name in Fabric.objects.order_by("name").values_list("pk", "name")
        ),
    )


def _scheduling() -> Iterator[str]:
    rows = list(
        Reservation.objects.values("fabric__name", "tenant__slug", "status")
        .annotate(n=Count("id"), gpus=Sum("gpus"))
        .order_by("fabric__name", "tenant__slug", "status")
    )

    def labels(row: dict[str, Any]) -> dict[str, object]:
        return {"fabric": row["fabric__name"], "tenant": row["tenant__slug"], "status": row["status"]}

    yield from family(
        "ibc_reservations", "gauge", "Reservations by tenant and status.", ((labels(r), r["n"]) for r in rows)
    )
    yield from family(
        "ibc_reservation_gpus",
        "gauge",
        "GPUs of the reservations by tenant and status (held while placed, provisioning or ready).",
        ((labels(r), r["gpus"] or 0) for r in rows),
    )
    quotas = list(Quota.objects.select_related("tenant", "pool").order_by("tenant__slug", "pool__name"))
    usages = quota_usages(quotas)
    yield from family(
        "ibc_quota_gpus",
        "gauge",
        "A tenant's quota on a pool and its use, in GPUs (kind: guaranteed_gpus, limit_gpus, used_gpus, ...).",
        (
            ({"tenant": q.tenant.slug, "pool": q.pool.name, "kind": kind}, value)
            for q in quotas
            for kind, value in usages[q.pk].items()
        ),
    )


def _energy() -> Iterator[str]:
    """Per pool, the energy of the last 24 hours in joules (the base unit; kWh x 3.6e6), drawn
    and always-on: catalogue watts over the recorded power states and bookings."""
    now = timezone.now()
    report = energy(EnergyQuery.checked(now - dt.timedelta(hours=24), now), now=now)
    rows = [row for row in report.rows if row["pool"] is not None]

    def samples(key: str) -> Iterator[Sample]:
        for row in rows:
            yield {"fabric": row["fabric"], "pool": row["name"]}, round(row[key] * JOULES_PER_KWH)

    yield from family(
        "ibc_pool_energy_24h_joules",
        "gauge",
        "Energy the pool's nodes drew over the last 24 hours, from the catalogue's busy/idle/off watts and the "
        "recorded power states and bookings (not metered).",
        samples("kwh"),
    )
    yield from family(
        "ibc_pool_energy_always_on_24h_joules",
        "gauge",
        "Energy the pool's nodes would have drawn over the last 24 hours had none been powered off.",
        samples("kwh_always_on"),
    )


def metrics_text() -> str:
    rows = _snapshots()
    lines = [*_links(rows), *_collector(rows), *_fabric_rows(), *_scheduling(), *_energy()]
    return "\n".join(lines) + "\n"
