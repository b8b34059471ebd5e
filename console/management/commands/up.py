"""``manage.py up``: run everything the console needs, print where and who, stop on Ctrl-C.

Embedded mode (no ``REDIS_URL``): one process — uvicorn (ASGI) with the Celery worker and beat as
threads. Production mode: web, worker and beat as child processes of this supervisor (for real
deployments run them under systemd instead; see docs/operations.md).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from argparse import ArgumentParser
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management.base import BaseCommand

from console.celery import recover_in_flight
from console.cli import manage_argv
from console.demo import DEMO_ACCOUNTS, DEMO_PASSWORD
from console.demo_sites import DEMO_LAB_DESIGNS
from console.fabric.services import publish_reconcile

if TYPE_CHECKING:
    from console.fabric.models import Fabric
    from console.power.emulator import Emulator

log = logging.getLogger(__name__)


#: The ASGI server's options wherever the console starts one (``up``, embedded or not, and
#: ``deploy/systemd/ibconsole-asgi.service``): no lifespan; frames up to 64 KiB (an agent's larger
#: results come in parts); and **no proxy headers**: uvicorn would otherwise take the client's
#: address from ``X-Forwarded-For`` when the peer is 127.0.0.1 (its default), so a local client
#: picked the address that lockouts and throttles count. The console reads that header itself,
#: from ``CONSOLE_TRUSTED_PROXIES`` proxies only (``console.tenancy.throttling.client_address``).
#: No access log either: a line per request drowns the problems (the reverse proxy logs requests).
UVICORN_OPTIONS: dict[str, Any] = {"lifespan": "off", "ws_max_size": 65536, "proxy_headers": False, "access_log": False}


def web_command(python: str, host: str, port: int) -> list[str]:
    """The uvicorn command line ``up`` runs (:data:`UVICORN_OPTIONS` as flags)."""
    options = UVICORN_OPTIONS
    return [
        *(python, "-m", "uvicorn", "console.asgi:application", "--host", host, "--port", str(port)),
        *("--lifespan", str(options["lifespan"]), "--ws-max-size", str(options["ws_max_size"])),
        *(() if options["proxy_headers"] else ("--no-proxy-headers",)),
        *(() if options["access_log"] else ("--no-access-log",)),
    ]


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


class Command(BaseCommand):
    help = "Start the console (web over ASGI, Celery worker and beat) until Ctrl-C."
    lab_fabrics: tuple[Fabric, ...] = ()  # the demo labs this command started (and stops on exit)
    collect: bool = False  # whether the live collector runs (there are lab fabrics)
    base_url: str = ""  # where this console answers, for its own demo webhook receiver
    demo_webhook_id: int | None = None  # the demo webhook registered at start (demo only)

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--host", default=os.environ.get("CONSOLE_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("CONSOLE_PORT", "8000")))
        parser.add_argument(
            "--no-lab",
            action="store_true",
            default=os.environ.get("CONSOLE_LAB", "1").lower() in ("0", "false", "no", "off"),
            help="do not start the demo lab (also CONSOLE_LAB=0)",
        )

    def handle(self, *args: Any, host: str, port: int, no_lab: bool = False, **options: Any) -> None:
        # an installed console's data directory does not exist before its first start (beat's
        # schedule, the labs, the BMC emulator's state live there)
        Path(settings.DATA_DIR).mkdir(parents=True, exist_ok=True)
        self._banner(host, port)
        self._demo_webhook(host, port)
        self.lab_fabrics = () if no_lab else self._start_demo_labs()
        agents = [] if no_lab else self._start_agents(host, port)
        # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default
        # handler that kills the process before the `finally` below stops the lab.
        signal.signal(signal.SIGTERM, _exit_on_sigterm)
        signal.signal(signal.SIGHUP, _exit_on_sigterm)  # the terminal closed: stop everything too
        self.collect = not no_lab and self._lab_fabrics_exist()
        flapping = [f for f in self.lab_fabrics if f.revision.design.name == DEMO_LAB_DESIGNS[0]]
        stop_flapping = self._start_flapper(flapping[0]) if flapping else None
        bmcs = self._start_bmc_emulator()
        self.stdout.write("  Ctrl-C stops everything.\n\n")
        self.stdout.flush()
        try:
            if settings.EMBEDDED:
                self._run_embedded(host, port)
            else:
                self._run_processes(host, port)
        finally:
            self.shut_down(agents, bmcs, stop_flapping)

    def shut_down(
        self,
        agents: list[tuple[Fabric, subprocess.Popen[bytes]]],
        bmcs: Emulator | None,
        stop_flapping: threading.Event | None,
    ) -> None:
        """Stop everything this command started, whatever stdout does: under ``make run | tee``
        Ctrl-C kills ``tee`` too, and a write to its dead pipe must not end the shutdown between
        two labs (the next start would find the second one running). Each step is tried on its
        own; what could not be stopped is logged."""
        from console.fabric.lab.fabrics import stop_lab

        steps: list[tuple[str, Any]] = []
        if stop_flapping is not None:
            steps.append(("the flapper", stop_flapping.set))
        steps.append(("the agents", lambda: self._stop_agents(agents)))
        if bmcs is not None:
            steps.append(("the BMC emulator", bmcs.stop))
        steps += [(f"lab {f.name}", lambda f=f: stop_lab(f)) for f in self.lab_fabrics]
        for what, stop in steps:
            try:
                stop()
            except Exception:
                log.exception("could not stop %s", what)
            else:
                self._say(f"{what} stopped.\n")

    def _say(self, text: str) -> None:
        """Print, unless stdout is gone (a closed pipe): shutting down must not depend on it."""
        try:
            self.stdout.write(text)
            self.stdout.flush()
        except (OSError, ValueError):
            pass

    def _recover(self) -> None:
        """Reconcile what was in flight, whatever survived (a lab that outlived the console
        included): every fabric with reservations provisioning or ending or changes open, the
        demo labs that just started too (the demo reservations' partitions)."""
        recover_in_flight()
        for lab_fabric in self.lab_fabrics:
            publish_reconcile(lab_fabric.pk)
        if self.demo_webhook_id is not None:
            threading.Thread(target=self._demo_webhook_test, name="demo-webhook-test", daemon=True).start()
        if self.lab_fabrics:
            threading.Thread(target=self._first_discoveries, name="first-discoveries", daemon=True).start()

    def _demo_webhook(self, host: str, port: int) -> None:
        """Demo only: on a seeded demo, the demo tenant's webhook points at the receiver this
        console serves (console/notify/demo_sink.py), so deliveries show without a receiver."""
        from console.notify import demo_sink
        from console.tenancy.errors import ConsoleError

        local = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        self.base_url = f"http://[{local}]:{port}" if ":" in local else f"http://{local}:{port}"
        try:
            webhook = demo_sink.ensure_webhook(self.base_url)
        except ConsoleError as exc:
            self.stdout.write(f"  Demo webhook:       not registered: {exc}\n")
            return
        if webhook is not None:
            self.demo_webhook_id = webhook.pk
            self.stdout.write(
                f"  Demo webhook:       {webhook.tenant.name}'s events to {webhook.url} "
                f"(demo only; received: {self.base_url}{demo_sink.DEMO_SINK_PATH})\n"
            )

    def _demo_webhook_test(self) -> None:
        """Once the web server answers, a test event to the demo webhook: the delivery log and the
        receiver show a signed, verified delivery from the first minute."""
        import urllib.request

        from console.notify import demo_sink

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        else:
            return
        from django.db import connection

        try:
            webhook = demo_sink.sink_webhook()
            if webhook is not None and webhook.pk == self.demo_webhook_id:
                demo_sink.send_test(webhook)
        finally:
            connection.close()  # this thread's own connection

    def _start_flapper(self, fabric: Fabric) -> threading.Event | None:
        """The demo's marginal cable: one leaf-spine link that drops now and then."""
        if os.environ.get("CONSOLE_FLAP", "1").lower() in ("0", "false", "no", "off"):
            return None
        from console.fabric.flapper import DEMO_FLAP, start_flapper

        stop = start_flapper(fabric, DEMO_FLAP)
        self.stdout.write(
            f"  Flapping link:      {DEMO_FLAP.node} port {DEMO_FLAP.port} drops for "
            f"{DEMO_FLAP.down_s:.0f} s every {DEMO_FLAP.every_s:.0f} s (CONSOLE_FLAP=0 stops it)\n"
        )
        return stop

    def _start_bmc_emulator(self) -> Emulator | None:
        """The Redfish BMCs of the demo nodes: sushy-emulator (fake driver), one system per node,
        its power states kept in the data directory across restarts."""
        from console.power import emulator

        try:
            running = emulator.start_demo(settings.DATA_DIR / "bmc-emulator")
        except emulator.EmulatorError as exc:
            log.error("BMC emulator not started: %s", exc)
            self.stdout.write(f"  BMC emulator:       NOT started (the demo nodes cannot be powered): {exc}\n")
            return None
        if running is None:
            return None
        self.stdout.write(f"  BMC emulator:       {running.url} (Redfish, {len(running.systems)} systems)\n")
        return running

    def _start_demo_labs(self) -> tuple[Fabric, ...]:
        """Start the lab of every demo site (console.demo_sites: one after the other, about a
        second each); returns the Fabrics whose labs this command started, to stop on exit."""
        # the first site's fabric runs a standby subnet manager too: master and standby on its page
        started = [self._start_demo_lab(design, standby=i == 0) for i, design in enumerate(DEMO_LAB_DESIGNS)]
        return tuple(fabric for fabric in started if fabric is not None)

    def _start_demo_lab(self, design: str, *, standby: bool = False) -> Fabric | None:
        """Start the demo design's lab (reusing its Fabric); returns the Fabric to stop on exit,
        or None when there is no lab to stop (packages missing, no demo design, already up)."""
        from console.fabric.lab.fabrics import INSTALL_HINT, lab_status, missing_packages, start_lab
        from console.fabric.lab.spec import LabError
        from console.fabric.models import Fabric
        from console.tenancy.context import Actor
        from console.tenancy.errors import ConsoleError
        from designer.models import DesignRevision

        missing = missing_packages()
        if missing:
            self.stdout.write(f"  Lab fabric:         not started: needs {', '.join(missing)} ({INSTALL_HINT})\n")
            return None
        revision = DesignRevision.objects.filter(design__name=design).order_by("-number").first()
        if revision is None:
            self.stdout.write(f"  Lab fabric:         not started: no design {design!r} (run `manage.py demo seed`)\n")
            return None
        try:
            existing = Fabric.objects.filter(revision=revision, driver="lab").first()
            was_up = existing is not None and lab_status(existing)["state"] == "up"
            fabric, _ = start_lab(revision, actor=Actor.system("up"), standby=standby)
        except (ConsoleError, LabError) as exc:
            self.stdout.write(f"  Lab fabric:         not started: {exc}\n")
            return None
        status = lab_status(fabric)
        if standby:  # (the first demo lab) its SM host records mlxlink's readings, one module hot
            self._record_phy(fabric)
        site = f"site {fabric.site.name}, " if fabric.site is not None else ""
        self.stdout.write(
            f"  Lab fabric:         {fabric.name} ({site}{design}, {status['state']}, "
            f"routing {status.get('routing', {}).get('in_use')}): "
            f"/fabrics/{fabric.pk}/\n"
            f"    diags: {status['env_line']}\n"
        )
        if was_up:
            self.stdout.write(
                f"    (already running, not started by this command: left running on exit; "
                f"`manage.py lab down --fabric {fabric.name}` stops it)\n"
            )
            return None
        return fabric

    def _record_phy(self, fabric: Fabric) -> None:
        """What a real SM host's periodic mlxlink job records (ibsim has no PHY): every switch
        port healthy but one, whose module runs past its alarm (validation's ``phy`` test names it)."""
        from console.fabric.lab.phy import record_all
        from designer.services import revision_graph

        hot = (sorted(revision_graph(fabric.revision).switches)[0], 1)
        files = record_all(fabric, {hot: {"temperature": 78.0}})
        self.stdout.write(f"  PHY readings:       {files} switch ports (mlxlink's), {hot[0]} port 1 running hot\n")

    def _start_agents(self, host: str, port: int) -> list[tuple[Fabric, subprocess.Popen[bytes]]]:
        """The lab is an SM host like any other: an agent per running lab fabric, started with
        nothing but this console's URL and a token (no database, no broker in its environment),
        and the fabric's pushes, verifications and audits go through it."""
        from console.fabric.lab.agent import agent_name, start_lab_agent
        from console.fabric.lab.fabrics import lab_status
        from console.fabric.models import Fabric
        from console.tenancy.context import Actor

        console = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"
        started = []
        for fabric in Fabric.objects.filter(driver=Fabric.Driver.LAB).order_by("name"):
            status = lab_status(fabric)
            if status["state"] != "up":
                continue
            for sm in status["sms"]:
                proc = start_lab_agent(fabric, console, actor=Actor.system("up"), sm=sm["name"])
                started.append((fabric, proc))
                self.stdout.write(
                    f"  Agent:              {fabric.name} ({agent_name(sm['name'])}): pid {proc.pid} "
                    f"(log {Path(sm['directory']).parent}/agent.log)\n"
                )
        return started

    def _stop_agents(self, agents: list[tuple[Fabric, subprocess.Popen[bytes]]]) -> None:
        """Stop the agents this command started (their labs' stop would too)."""
        for _fabric, proc in agents:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()

    def _first_discoveries(self) -> None:
        """A lab never discovered gets one sweep as soon as its agent is connected (a discovery
        job, run by a worker through the agent), so the fabric's compare, port table and the
        overview's drift have something to show from the first minutes on."""
        from django.db import connection

        from console.fabric.discovery import jobs
        from console.fabric.discovery import services as discovery
        from console.fabric.models import FabricAgent
        from console.tenancy.context import Actor

        try:
            waiting = [f for f in self.lab_fabrics if discovery.latest_run(f) is None]
            deadline = time.monotonic() + 120
            while waiting and time.monotonic() < deadline:
                for fabric in list(waiting):
                    if FabricAgent.objects.filter(fabric=fabric, connected=True, sm_state="MASTER").exists():
                        jobs.start(fabric, actor=Actor.system("up"))
                        waiting.remove(fabric)
                time.sleep(1.0)
        finally:
            connection.close()  # this thread's own connection

    def _lab_fabrics_exist(self) -> bool:
        from console.fabric.models import Fabric

        return Fabric.objects.filter(driver=Fabric.Driver.LAB).exists()

    def _collector_thread(self) -> threading.Event:
        """Embedded mode: the live collector runs as a thread (the channel layer is in-memory,
        so it must share the web process); production runs ``manage.py collector``."""
        from console.fabric.models import Fabric
        from console.telemetry.collector import COLLECTED, CollectorOptions
        from console.telemetry.runner import start_thread

        fabrics = list(Fabric.objects.filter(driver__in=COLLECTED).select_related("revision"))
        options = CollectorOptions(
            interval=settings.TELEMETRY_INTERVAL_S,
            lab_traffic=settings.TELEMETRY_LAB_TRAFFIC,
            store_interval=settings.TELEMETRY_STORE_INTERVAL_S,
        )
        return start_thread(fabrics, options)

    def _banner(self, host: str, port: int) -> None:
        mode = "embedded (SQLite, in-memory broker)" if settings.EMBEDDED else "production"
        from django.contrib.auth import get_user_model

        seeded = set(
            get_user_model()
            .objects.filter(username__in=[a.username for a in DEMO_ACCOUNTS])
            .values_list("username", flat=True)
        )
        accounts = [a for a in DEMO_ACCOUNTS if a.username in seeded]
        lines = [
            "",
            f"  InfiniBand console: http://{host}:{port}/   ({mode})",
            f"  API docs:           http://{host}:{port}/api/docs/",
            *(
                ["  Demo accounts (password: " + DEMO_PASSWORD + "):"]
                if accounts
                else ["  No demo data: sign in as an operator (ibconsole manage operator create NAME)."]
            ),
            *(f"    {a.username:<10} {a.note}" for a in accounts),
            "",
        ]
        self.stdout.write("\n".join(lines))
        self.stdout.flush()

    def _run_embedded(self, host: str, port: int) -> None:
        import uvicorn

        from console import embedded
        from console.celery import app

        services = embedded.start(app)
        self._recover()
        stop_collector = self._collector_thread() if self.collect else None
        try:
            uvicorn.run("console.asgi:application", host=host, port=port, log_level="info", **UVICORN_OPTIONS)
        finally:
            if stop_collector is not None:
                stop_collector.set()
            services.stop()

    def _workers(self, python: str) -> dict[str, list[str]]:
        """One worker for the default queue, and one per site consuming only ``site.<slug>`` (the
        tasks that talk to that site's fabrics: console/fabric/routing.py) for each site with a
        fabric not reached through an agent: a site whose SM hosts run agents needs no worker of
        its own (its fabrics' tasks take the default queue). Here they all run on this machine; in
        production each site's worker runs at its site (docs/operations.md)."""
        from console.fabric.models import AGENT_DRIVERS, Site

        def worker(name: str, queue: str, concurrency: int) -> list[str]:
            return [
                *(python, "-m", "celery", "-A", "console", "worker", "-l", "INFO"),
                *("-c", str(concurrency), "-n", f"{name}@%h", "-Q", queue),
            ]

        workers = {"worker": worker("worker", settings.CELERY_TASK_DEFAULT_QUEUE, 2)}
        for site in Site.objects.order_by("slug"):
            label = f"Site {site.name}:"
            if not site.fabrics.exclude(driver__in=AGENT_DRIVERS).exists():
                self.stdout.write(f"  {label:<20}reached through its SM hosts' agents (no worker of its own)\n")
                continue
            workers[f"worker-{site.slug}"] = worker(f"site-{site.slug}", site.queue, 2)
            self.stdout.write(f"  {label:<20}its worker consumes queue {site.queue}\n")
        return workers

    def _run_processes(self, host: str, port: int) -> None:
        python = sys.executable
        commands = {
            "web": web_command(python, host, port),
            "beat": [
                python,
                "-m",
                "celery",
                "-A",
                "console",
                "beat",
                "-l",
                "INFO",
                "-s",
                settings.CELERY_BEAT_SCHEDULE_FILENAME,
            ],
        }
        commands.update(self._workers(python))
        if self.collect:
            commands["collector"] = manage_argv("collector")
        children = {name: subprocess.Popen(cmd, start_new_session=True) for name, cmd in commands.items()}
        self._recover()  # queued in Redis; the worker picks it up when it is ready
        stopping = False

        def stop(*_: object) -> None:
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while not stopping:
                for name, child in children.items():
                    if child.poll() is not None:
                        self.stderr.write(f"{name} exited with {child.returncode}; stopping")
                        stopping = True
                time.sleep(0.5)
        finally:
            for child in children.values():
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGTERM)
            deadline = time.monotonic() + 15
            for child in children.values():
                try:
                    child.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(child.pid, signal.SIGKILL)
            self.stdout.write("stopped.")
