"""``manage.py lab``: run lab fabrics (ibsim + a real OpenSM) and inject faults into them.

    lab up --design <id|name>[/<rev>] [--name NAME] [--agent CONSOLE_URL] [--standby-sm] [--json]
           (the lab's agents connect out to CONSOLE_URL, default $CONSOLE_URL or http://127.0.0.1:8000;
           --standby-sm: a standby OpenSM on a second CA, with its own agent)
    lab down --fabric F [--json]
    lab status [--fabric F] [--json]
    lab cable unplug|replug --fabric F --node NAME --port N [--json]   (read back over SMPs)
    lab counters set --fabric F --node NAME --port N COUNTER=VALUE ... [--json]
    lab phy set --fabric F --node NAME --port N [temperature=79] [effective_ber=3e-11] ... [--json]

Thin: everything happens in :mod:`console.fabric.lab.fabrics` and :mod:`console.fabric.lab.faults`.
Node names are the design's (``su01-leaf-r1``, ``su01-n01`` whose port N is its HCA-N); ibsim node
ids work too.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.fabric.lab.agent import start_lab_agents
from console.fabric.lab.fabrics import find_fabric, find_revision, lab_status, start_lab, stop_lab
from console.fabric.lab.faults import parse_counter_assignments, replug, set_counters, unplug
from console.fabric.lab.phy import FIELDS as PHY_FIELDS
from console.fabric.lab.phy import parse_assignments as parse_phy
from console.fabric.lab.phy import set_phy
from console.fabric.lab.spec import LabError
from console.fabric.models import Fabric
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError


class Command(BaseCommand):
    help = "Start, stop and inspect lab fabrics (OpenSM on ibsim); unplug cables, set counters."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        up = sub.add_parser("up", help="start the lab of a design revision")
        up.add_argument("--design", required=True, help="design id or name, optionally /rev")
        up.add_argument("--name", help="fabric name (default: reuse the revision's lab fabric)")
        up.add_argument(
            "--agent",
            metavar="CONSOLE_URL",
            help="the console the lab's agent connects out to (default: $CONSOLE_URL, else "
            "http://127.0.0.1:8000): the fabric's pushes and reads go through it, as on a real SM host",
        )
        up.add_argument(
            "--standby-sm",
            action="store_true",
            help="run a standby OpenSM on a second CA of the lab too (its own files and agent)",
        )
        down = sub.add_parser("down", help="stop a fabric's lab")
        down.add_argument("--fabric", required=True, help="fabric id or name")
        status = sub.add_parser("status", help="where the lab is and how to reach it")
        status.add_argument("--fabric", help="fabric id or name (default: every lab fabric)")
        cable = sub.add_parser("cable", help="pull or put back a cable")
        cable.add_argument("op", choices=["unplug", "replug"])
        counters = sub.add_parser("counters", help="set port counters")
        counters.add_argument("op", choices=["set"])
        counters.add_argument("values", nargs="+", metavar="COUNTER=VALUE")
        phy = sub.add_parser("phy", help="record a port's PHY reading (mlxlink's: temperature, BER)")
        phy.add_argument("op", choices=["set"])
        phy.add_argument("values", nargs="+", metavar="FIELD=VALUE", help=f"any of {', '.join(PHY_FIELDS)}")
        for p in (cable, counters, phy):
            p.add_argument("--fabric", required=True, help="fabric id or name")
            p.add_argument("--node", required=True, help="design name or ibsim node id")
            p.add_argument("--port", required=True, type=int)
        for p in (up, down, status, cable, counters, phy):
            p.add_argument("--json", action="store_true", help="machine-readable output")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        self.as_json = options["json"]
        try:
            getattr(self, f"_{action}")(**options)
        except LabError as exc:  # LabNotRunning is one too
            raise CommandError(str(exc)) from exc
        except ConsoleError as exc:
            raise CommandError(exc.detail) from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    def _emit(self, data: Any, text: str) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str) if self.as_json else text)

    def _up(
        self, *, design: str, name: str | None, agent: str | None = None, standby_sm: bool = False, **_: Any
    ) -> None:
        revision = find_revision(design)
        fabric = start_lab(revision, name=name, actor=Actor.cli(), standby=standby_sm)[0]
        start_lab_agents(fabric, agent or settings.CONSOLE_URL, actor=Actor.cli())
        status = lab_status(fabric, probe=True)
        self._emit(status, _describe(status))

    def _down(self, *, fabric: str, **_: Any) -> None:
        status = stop_lab(find_fabric(fabric), actor=Actor.cli())
        self._emit(status, f"lab of {status['fabric']}: {status['state']}")

    def _status(self, *, fabric: str | None, **_: Any) -> None:
        if fabric:
            status = lab_status(find_fabric(fabric), probe=True)
            self._emit(status, _describe(status))
            return
        rows = [
            lab_status(f) for f in Fabric.objects.filter(driver=Fabric.Driver.LAB).select_related("revision__design")
        ]
        text = "\n\n".join(_describe(s) for s in rows) or "no lab fabrics"
        self._emit(rows, text)

    def _cable(self, *, op: str, fabric: str, node: str, port: int, **_: Any) -> None:
        target = find_fabric(fabric)
        action = unplug if op == "unplug" else replug
        done = action(target, node, port, actor=Actor.cli())
        self._emit(
            {"fabric_id": target.pk, **done.as_dict(), "ok": True},
            f"{op}ged {node} port {port} in {target.name}: read back over SMP, "
            f"{done.as_dict()['before']} → {done.as_dict()['after']}",
        )

    def _counters(self, *, fabric: str, node: str, port: int, values: list[str], **_: Any) -> None:
        target = find_fabric(fabric)
        counters = parse_counter_assignments(values)
        replies = set_counters(target, node, port, counters, actor=Actor.cli())
        self._emit(
            {"fabric_id": target.pk, "node": node, "port": port, "counters": counters},
            "\n".join(replies),
        )

    def _phy(self, *, fabric: str, node: str, port: int, values: list[str], **_: Any) -> None:
        target = find_fabric(fabric)
        reading = set_phy(target, node, port, parse_phy(values), actor=Actor.cli())
        self._emit(
            {"fabric_id": target.pk, "node": node, "port": port, "reading": reading.as_json()},
            f"recorded {node} port {port}'s PHY reading in {target.name}: "
            f"{reading.temperature:g} °C, effective BER {reading.effective_ber:.1E}",
        )


def _describe(status: dict[str, Any]) -> str:
    lines = [
        f"fabric {status['fabric']} (id {status['fabric_id']}): {status['design']} "
        f"r{status['revision']}, lab {status['state']}",
    ]
    if status.get("workdir"):
        lines.append(f"  workdir        {status['workdir']}")
    for key in ("ibsim_sockname", "umad2sim", "sm_host", "opensm_pid", "agent_pid", "up_seconds"):
        if status.get(key) is not None:
            lines.append(f"  {key:<14} {status[key]}")
    for sm in status.get("sms") or []:
        role = f", {sm['role']} (priority {sm['priority']})" if sm.get("role") else ""
        lines.append(f"  sm {sm['name']:<11} pid {sm['pid'] or '-'} on {sm['host']}{role}")
    routing = status.get("routing")
    if routing:
        flag = "  FALLBACK" if routing["fallback"] else ""
        lines.append(f"  routing        {routing['configured']} → {routing['in_use']}{flag}")
    if status.get("env_line"):
        lines.append("  point infiniband-diags at it:")
        lines.append(f"    {status['env_line']}")
    return "\n".join(lines)
