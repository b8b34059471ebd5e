"""Console processes for tests that need a real server: uvicorn (ASGI, for the sockets and the
production request path, persistent database connections included) and the collector, as
subprocesses with the test's database, Redis and data directory; stopped after the test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[1]
#: PostgreSQL's application_name of every database session the test servers open.
SERVER_APPLICATION_NAME = "ibc-test-server"
#: ... and of the session's console that the labs' agents connect to (tests/conftest.py).
LAB_CONSOLE_APPLICATION_NAME = "ibc-test-lab-console"


def copy_tracked(dest: Path, *pathspecs: str) -> Path:
    """The checkout's tracked files (those ``pathspecs`` name; all without) copied into ``dest``:
    what a clone holds, nothing of the work tree's untracked files."""
    names = subprocess.run(["git", "ls-files", "-z", *pathspecs], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, names.decode().split("\0")):
        if (ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).write_bytes((ROOT / name).read_bytes())
    return dest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(data_dir: Path, application_name: str = SERVER_APPLICATION_NAME) -> dict[str, str]:
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    # named, so a test can tell the server's database sessions from its own and from leftovers
    env["DATABASE_URL"] = (
        f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}?application_name={application_name}"
    )
    env["CONSOLE_DATA_DIR"] = str(data_dir)
    env["DJANGO_ALLOW_ASYNC_UNSAFE"] = ""
    # console.asgi sets this for its own process; a test that imported it must not pass it on
    env.pop("CONSOLE_DB_CONN_MAX_AGE", None)
    return env


def spawner(data_dir: Path, started: list[subprocess.Popen], application_name: str = SERVER_APPLICATION_NAME):
    """``start(*argv)``: a console process with the test's database, Redis and ``data_dir``
    (its log there), appended to ``started``."""
    data_dir.mkdir(parents=True, exist_ok=True)

    def start(*argv: str) -> subprocess.Popen:
        log = open(data_dir / f"{argv[0].replace('.', '_')}-{len(started)}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=ROOT,
            env=_env(data_dir, application_name),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        started.append(proc)
        return proc

    return start


@pytest.fixture
def processes(lab_data_dir):
    started: list[subprocess.Popen] = []
    yield spawner(lab_data_dir, started)
    stop_all(started)


def stop_all(started: list[subprocess.Popen]) -> None:
    """SIGTERM each process group still running, SIGKILL after 10 s."""
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _wait_http(url: str, server: str, timeout: float = 30) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/healthz", timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{server} did not come up")


def web(processes) -> str:
    """uvicorn on a free port; the console's URL once it answers."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    processes(
        "-m",
        "uvicorn",
        "console.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--lifespan",
        "off",
        "--log-level",
        "warning",
    )
    _wait_http(url, "uvicorn")
    return url


def wsgi(processes) -> str:
    """gunicorn with one sync worker (how production serves REST and pages) on a free port."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    processes(
        "-m", "gunicorn", "console.wsgi:application", "-w", "1", "-b", f"127.0.0.1:{port}", "--log-level", "warning"
    )
    _wait_http(url, "gunicorn")
    return url


def serve(processes, fabric) -> str:
    """:func:`web` and the fabric's collector (0.5 s sweeps); the console's URL."""
    processes("manage.py", "collector", "--fabric", str(fabric.pk), "--interval", "0.5")
    return web(processes)


def login(browser, url: str, username: str):
    page = browser.new_context().new_page()
    page.goto(f"{url}/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw-12345678")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{url}/")
    return page
