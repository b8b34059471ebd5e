"""``manage.py collector [--fabric F] [--site S] [--interval 1.0]``: the live collector, its own
process; one loop per fabric (console/telemetry/runner.py). Run ``--site <slug>`` at each site so a
site's collectors keep sweeping its fabrics when the link to the other sites is down."""

from __future__ import annotations

import signal
import threading
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console.fabric.models import Fabric, Site
from console.telemetry.collector import COLLECTED, CollectorOptions, FabricCollector
from console.telemetry.runner import collect_fabrics


class Command(BaseCommand):
    help = "Collect port counters (through each fabric's agent), raise events and stream them live."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--fabric",
            action="append",
            help="fabric id or name (repeatable); default: every lab, OpenSM and agent fabric",
        )
        parser.add_argument("--site", action="append", help="site slug (repeatable): every such fabric of the site")
        parser.add_argument("--interval", type=float, default=settings.TELEMETRY_INTERVAL_S)
        parser.add_argument("--reader", choices=["auto", "mad", "perfquery"], default="auto")
        parser.add_argument("--no-traffic", action="store_true", help="no lab traffic model")
        parser.add_argument("--sweeps", type=int, default=None, help="stop after N sweeps")

    def handle(
        self,
        *args: Any,
        fabric: list[str] | None = None,
        site: list[str] | None = None,
        interval: float = 1.0,
        reader: str = "auto",
        no_traffic: bool = False,
        sweeps: int | None = None,
        **options: Any,
    ) -> None:
        fabrics = _fabrics(fabric, site)
        if not fabrics:
            raise CommandError("no fabric to collect (start a lab or give --fabric)")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        opts = CollectorOptions(
            interval=interval,
            reader=reader,
            lab_traffic=settings.TELEMETRY_LAB_TRAFFIC and not no_traffic,
            store_interval=settings.TELEMETRY_STORE_INTERVAL_S,
        )
        names = ", ".join(f.name for f in fabrics)
        self.stdout.write(f"collecting {names} every {interval}s (Ctrl-C stops)")
        collect_fabrics(fabrics, opts, stop, sweeps=sweeps, log=self.stdout.write)


def _fabrics(refs: list[str] | None, sites: list[str] | None = None) -> list[Fabric]:
    qs = Fabric.objects.select_related("revision")
    if sites:
        unknown = set(sites) - set(Site.objects.filter(slug__in=sites).values_list("slug", flat=True))
        if unknown:
            raise CommandError(f"no site {', '.join(sorted(unknown))}")
        qs = qs.filter(site__slug__in=sites)
    if not refs:
        return list(qs.filter(driver__in=COLLECTED))
    out = []
    for ref in refs:
        found = qs.filter(pk=int(ref)).first() if ref.isdigit() else qs.filter(name=ref).first()
        if found is None:
            raise CommandError(f"no fabric {ref!r}")
        out.append(found)
    return out


__all__ = ["Command", "FabricCollector"]
