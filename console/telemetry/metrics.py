"""``/metrics`` in Prometheus text format: per-port rates and errors, link states, reservations,
quota usage and push outcomes, so existing Grafana setups can scrape the console."""

from __future__ import annotations

import hmac
from collections.abc import Iterator

from django.db.models import Count
from django.http import HttpRequest

from console.fabric.models import ChangeRequest, Fabric
from console.telemetry import store
from console.telemetry.models import FabricEvent
from console.tenancy.models import Principal
from scheduling.models import Quota, Reservation
from scheduling.services.quotas import quota_usage


def metrics_allowed(request: HttpRequest, token: str) -> bool:
    """An operator/auditor session, or ``Authorization: Bearer <METRICS_TOKEN>``."""
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer "):
        return hmac.compare_digest(header[7:].strip(), token)
    user = getattr(request, "user", None)
    return bool(user and user.is_authenticated and Principal.of(user).sees_all_tenants)


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _lines() -> Iterator[str]:
    yield "# HELP ibc_link_tx_bits_per_second Bits per second leaving the measuring switch port."
    yield "# TYPE ibc_link_tx_bits_per_second gauge"
    rows = []
    for fabric in Fabric.objects.only("pk", "name"):
        snap = store.load_snapshot(fabric.pk)
        if snap:
            rows.append((fabric, snap))
    for metric, key, kind in (
        ("ibc_link_tx_bits_per_second", "tx_bps", "gauge"),
        ("ibc_link_rx_bits_per_second", "rx_bps", "gauge"),
        ("ibc_link_utilisation_ratio", "util", "gauge"),
        ("ibc_link_up", "up", "gauge"),
    ):
        if metric != "ibc_link_tx_bits_per_second":
            yield f"# TYPE {metric} {kind}"
        for fabric, snap in rows:
            for lid, st in snap["links"].items():
                value = int(st[key]) if key == "up" else st[key]
                yield f'{metric}{{fabric="{_label(fabric.name)}",link="{_label(lid)}"}} {value}'
    yield "# TYPE ibc_link_errors_total counter"
    for fabric, snap in rows:
        for lid, st in snap["links"].items():
            for name, value in (st.get("error_totals") or {}).items():
                yield (
                    f'ibc_link_errors_total{{fabric="{_label(fabric.name)}",'
                    f'link="{_label(lid)}",counter="{name}"}} {value}'
                )
    yield "# TYPE ibc_collector_cycle_seconds gauge"
    for fabric, snap in rows:
        yield f'ibc_collector_cycle_seconds{{fabric="{_label(fabric.name)}"}} {snap.get("cycle_s", 0)}'
    yield "# TYPE ibc_fabric_events gauge"
    for row in FabricEvent.objects.values("fabric__name", "kind", "status").annotate(n=Count("id")):
        yield (
            f'ibc_fabric_events{{fabric="{_label(row["fabric__name"])}",kind="{row["kind"]}",'
            f'status="{row["status"]}"}} {row["n"]}'
        )
    yield "# TYPE ibc_change_requests gauge"
    for row in ChangeRequest.objects.values("fabric__name", "status").annotate(n=Count("id")):
        yield (f'ibc_change_requests{{fabric="{_label(row["fabric__name"])}",status="{row["status"]}"}} {row["n"]}')
    yield from _scheduling()


def _scheduling() -> Iterator[str]:
    yield "# TYPE ibc_reservations gauge"
    for row in Reservation.objects.values("fabric__name", "tenant__slug", "status").annotate(n=Count("id")):
        yield (
            f'ibc_reservations{{fabric="{_label(row["fabric__name"])}",'
            f'tenant="{_label(row["tenant__slug"])}",status="{row["status"]}"}} {row["n"]}'
        )
    yield "# TYPE ibc_quota_gpus gauge"
    for quota in Quota.objects.select_related("tenant", "pool"):
        usage = quota_usage(quota)
        for key, value in usage.items():
            yield (
                f'ibc_quota_gpus{{tenant="{_label(quota.tenant.slug)}",'
                f'pool="{_label(quota.pool.name)}",kind="{key}"}} {value}'
            )


def metrics_text() -> str:
    return "\n".join(_lines()) + "\n"
