"""``manage.py up``: run everything the console needs, print where and who, stop on Ctrl-C.

Embedded mode (no ``REDIS_URL``): one process — uvicorn (ASGI) with the Celery worker and beat as
threads. Production mode: web, worker and beat as child processes of this supervisor (for real
deployments run them under systemd instead; see docs/operations.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from console.demo import DEMO_ACCOUNTS, DEMO_PASSWORD


class Command(BaseCommand):
    help = "Start the console (web over ASGI, Celery worker and beat) until Ctrl-C."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default=os.environ.get("CONSOLE_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("CONSOLE_PORT", "8000")))

    def handle(self, *args, host: str, port: int, **options) -> None:
        self._banner(host, port)
        if settings.EMBEDDED:
            self._run_embedded(host, port)
        else:
            self._run_processes(host, port)

    def _banner(self, host: str, port: int) -> None:
        mode = "embedded (SQLite, in-memory broker)" if settings.EMBEDDED else "production"
        lines = [
            "",
            f"  InfiniBand console: http://{host}:{port}/   ({mode})",
            f"  API docs:           http://{host}:{port}/api/docs/",
            "  Demo accounts (password: " + DEMO_PASSWORD + "):",
            *(f"    {a.username:<10} {a.note}" for a in DEMO_ACCOUNTS),
            "  Ctrl-C stops everything.",
            "",
        ]
        self.stdout.write("\n".join(lines))
        self.stdout.flush()

    def _run_embedded(self, host: str, port: int) -> None:
        import uvicorn

        from console import embedded
        from console.celery import app

        services = embedded.start(app)
        try:
            uvicorn.run(
                "console.asgi:application",
                host=host,
                port=port,
                lifespan="off",
                log_level="info",
                ws_max_size=65536,
            )
        finally:
            services.stop()

    def _run_processes(self, host: str, port: int) -> None:
        python = sys.executable
        commands = {
            "web": [
                python,
                "-m",
                "uvicorn",
                "console.asgi:application",
                "--host",
                host,
                "--port",
                str(port),
                "--lifespan",
                "off",
                "--ws-max-size",
                "65536",
            ],
            "worker": [
                python,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "-l",
                "INFO",
                "-c",
                "2",
                "-n",
                "worker@%h",
            ],
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
        children = {
            name: subprocess.Popen(cmd, start_new_session=True) for name, cmd in commands.items()
        }
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
