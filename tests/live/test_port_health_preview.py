"""The health policy's preview over stored samples (console.telemetry.port_health.preview): the
raw samples' errors by counter, summed back into totals per port, replayed through the policy —
the ports it names are those whose stored errors within the hour pass the threshold (counted
here from the rows written), and the collector's history writer stores those counts."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from console.telemetry import services
from console.telemetry.core import LinkStatus
from console.telemetry.history import HistoryWriter
from console.telemetry.models import LinkSample
from console.telemetry.port_health import preview
from console.tenancy.errors import Invalid
from tests.live.fabric_fixtures import world  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
RULES = [{"counter": "SymbolErrorCounter", "threshold": 10, "window_s": 3600}]


def test_the_preview_names_the_ports_whose_stored_errors_pass_the_threshold(world):  # noqa: F811
    fabric, lm = world["fabric"], world["collector"].lm
    links = sorted(lm.ends)[:3]
    where = {lid: (lm.ends[lid].switch, "leaf") for lid in links}
    start = timezone.now() - dt.timedelta(minutes=50)
    # link 0: 2 symbol errors per 10-minute sample (12 in the hour); link 1: 1 per sample (6);
    # link 2: 30 link recoveries (another counter)
    for i in range(6):
        rows = {
            links[0]: {
                "tx_bps": 0,
                "rx_bps": 0,
                "util": 0,
                "errors": 2,
                "error_counts": {"SymbolErrorCounter": 2},
                "up": True,
            },
            links[1]: {
                "tx_bps": 0,
                "rx_bps": 0,
                "util": 0,
                "errors": 1,
                "error_counts": {"SymbolErrorCounter": 1},
                "up": True,
            },
            links[2]: {
                "tx_bps": 0,
                "rx_bps": 0,
                "util": 0,
                "errors": 5,
                "error_counts": {"LinkErrorRecoveryCounter": 5},
                "up": True,
            },
        }
        services.store_samples(fabric.pk, start + dt.timedelta(minutes=10 * i), rows, where)
    stored = sum(
        c.get("SymbolErrorCounter", 0)
        for c in LinkSample.objects.filter(link_id=links[0]).values_list("error_counts", flat=True)
    )
    assert stored == 12
    seen = preview(fabric, {"rules": RULES})
    assert seen["samples"] == 18 and seen["ports"] == 3
    assert [(d["kind"], f"{d['switch']}/{d['port']}") for d in seen["decisions"]] == [("isolate", links[0])]
    assert seen["decisions"][0]["reasons"][0].startswith("SymbolErrorCounter +12 in ")
    with pytest.raises(Invalid, match="threshold"):
        preview(fabric, {"rules": [{"counter": "SymbolErrorCounter", "threshold": "ten"}]})


def test_the_history_writer_stores_errors_by_counter(world, monkeypatch):  # noqa: F811
    fabric, lm = world["fabric"], world["collector"].lm
    monkeypatch.setattr("console.telemetry.history._in_memory_db", lambda: True)  # written in this transaction
    lid = sorted(lm.ends)[0]
    writer = HistoryWriter(fabric.pk, interval=0.0)
    writer.add({lid: LinkStatus(lid, True, errors={"SymbolErrorCounter": 3, "PortRcvErrors": 0})}, lm)
    writer.close()
    row = LinkSample.objects.get(fabric=fabric, link_id=lid)
    assert row.errors == 3 and row.error_counts == {"SymbolErrorCounter": 3}
