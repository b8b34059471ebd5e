"""``manage.py agent``: the console's agent on a subnet-manager host (console/fabric/agents/runtime.py),
with the live collector's reads (console/telemetry/agent_ops.py): it lives in the project's wiring
because it composes both.

    export IBCONSOLE_AGENT_TOKEN=ibca_…          # or --token-file /etc/ibconsole/agent.token
    manage.py agent --console https://console.example.com --fabric prod-ib \\
        --opensm-dir /etc/opensm --pid-file /run/opensm.pid [--ca mlx5_0 --ca-port 1]
    manage.py agent --console http://127.0.0.1:8000 --fabric superpod-su1 --lab var/labs/superpod-su1 \
        [--lab-sm standby]

It needs no database and no broker: only the console's URL and its token (an operator creates
it: ``POST /api/fabrics/{id}/agents/``). Ctrl-C or SIGTERM stops it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.fabric.agents.runtime import Agent, AgentConfig, Refused
from console.fabric.drivers.hosts import LabHost, LocalOpenSmHost, OpenSmHost
from console.fabric.lab.manager import Lab
from console.fabric.lab.sms import PRIMARY, SMS
from console.fabric.lab.spec import LabError
from console.telemetry.agent_ops import CounterOps

TOKEN_ENV = "IBCONSOLE_AGENT_TOKEN"


class Command(BaseCommand):
    help = "Run the console's agent on a subnet-manager host (connects out to the console)."
    requires_system_checks: list[str] = []  # they read the database, which an SM host has none of

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--console", required=True, help="the console's URL, http(s)://host[:port]")
        parser.add_argument("--fabric", required=True, help="the fabric (name or id) this SM host serves")
        parser.add_argument("--name", default="", help="this agent's host name as the console shows it")
        parser.add_argument("--token-file", help=f"file holding the agent's token (default: ${TOKEN_ENV})")
        parser.add_argument("--heartbeat", type=float, default=5.0, help="seconds between heartbeats")
        parser.add_argument("--proxy", help="HTTP proxy URL (default: the environment's https_proxy)")
        parser.add_argument(
            "--frame-kib",
            type=float,
            default=48,
            help="results longer than this go in parts (below the console's --ws-max-size; 64 KiB with make run)",
        )
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--lab", help="a lab's workdir: serve the lab's OpenSM (ibsim)")
        where.add_argument("--opensm-dir", help="OpenSM's file directory on this host (e.g. /etc/opensm)")
        parser.add_argument(
            "--lab-sm",
            choices=SMS,
            default=PRIMARY,
            help="with --lab: which of the lab's subnet managers this agent serves (default primary)",
        )
        parser.add_argument("--pid-file", help="OpenSM's pid file (SIGHUP reloads it)")
        parser.add_argument("--reload-command", nargs="+", help="command that reloads OpenSM instead of SIGHUP")
        parser.add_argument("--restart-command", nargs="+", help="command that restarts OpenSM")
        parser.add_argument("--ca", help="the HCA infiniband-diags use (e.g. mlx5_0)")
        parser.add_argument("--ca-port", type=int, help="its port")
        parser.add_argument("--opensm-log", help="OpenSM's log (routing check, sweeps; needs force_log_flush TRUE)")
        parser.add_argument("--routing-engine", help="the routing engine OpenSM is configured with (default ftree)")
        parser.add_argument(
            "--counters",
            choices=("mad", "perfquery"),
            default="mad",
            help="how the live view's port counters are read here: the MAD helper (perfquery where it cannot start), or perfquery only",
        )
        parser.add_argument(
            "--phy-dir",
            help="where a periodic job records mlxlink's output per port (temperature, BER: fabric validation)",
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        token = self._token(opts.get("token_file"))
        config = AgentConfig(
            console=opts["console"],
            fabric=opts["fabric"],
            token=token,
            name=opts["name"],
            heartbeat_s=opts["heartbeat"],
            proxy=opts.get("proxy"),
            frame_chars=max(64, int(opts["frame_kib"] * 1024)),
        )
        try:
            config.url()
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        host = self._host(opts)
        counters = CounterOps(host, counters=opts["counters"])
        try:
            Agent(config, host, extra_ops=counters.ops()).run(stop)
        except Refused as exc:
            raise CommandError(str(exc)) from None
        finally:
            counters.close()

    def _token(self, path: str | None) -> str:
        if path:
            try:
                return Path(path).read_text().strip()
            except OSError as exc:
                raise CommandError(f"cannot read the token file: {exc}") from None
        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            raise CommandError(f"no token: set {TOKEN_ENV} or pass --token-file")
        return token

    def _host(self, opts: dict[str, Any]) -> OpenSmHost:
        if opts.get("lab"):
            try:
                return LabHost(Lab.attach(opts["lab"]), opts.get("lab_sm") or PRIMARY)
            except LabError as exc:
                raise CommandError(str(exc)) from None
        config = {"directory": opts["opensm_dir"]}
        for key in (
            "pid_file",
            "reload_command",
            "restart_command",
            "ca",
            "ca_port",
            "opensm_log",
            "routing_engine",
            "phy_dir",
        ):
            if opts.get(key):
                config[key] = opts[key]
        return LocalOpenSmHost(config)
