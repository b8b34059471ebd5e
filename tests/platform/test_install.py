"""Installing the console as a package: ``pip install .`` gives a wheel with the built frontend,
the templates and the migrations, and a fresh virtualenv holding it runs ``ibconsole up`` from a
directory with no source tree; a machine whose Node.js is too old for the frontend gets one from
PyPI (scripts/node.sh).

The wheel is built from a copy of the checkout's tracked package files, so nothing of the work
tree (an untracked file, the editable install) can stand in for what the wheel lacks. The fresh
virtualenv reads its dependencies from the test environment's site-packages through a ``.pth``
file (the pinned set, already installed: no download per run) but not the editable install of
this checkout, whose finder is only loaded from a site directory's own ``.pth`` files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.needs import needs
from tests.servers import _free_port, copy_tracked

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("console", "designer", "scheduling")

pytestmark = [needs("postgresql"), pytest.mark.timeout(300)]


def run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, check=True, **kw)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from the tracked package files plus the built frontend."""
    manifest = ROOT / "console" / "web" / "dist" / "manifest.json"
    assert manifest.is_file(), "the frontend is not built (scripts/bootstrap.sh builds it)"
    src = copy_tracked(tmp_path_factory.mktemp("src"), *PACKAGES, "pyproject.toml", "README.md")
    for built in (ROOT / "console" / "web" / "dist").rglob("*"):
        if built.is_file():
            target = src / built.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(built.read_bytes())
    out = tmp_path_factory.mktemp("wheels")
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(src)])
    (built_wheel,) = out.glob("*.whl")
    return built_wheel


def test_the_wheel_carries_the_frontend_templates_migrations_and_the_command(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    manifest = json.loads((ROOT / "console" / "web" / "dist" / "manifest.json").read_text())
    # every script and stylesheet the pages load, as the build's own manifest lists them
    files = {f"console/web/dist/{e['file']}" for e in manifest.values()}
    files |= {f"console/web/dist/{css}" for e in manifest.values() for css in e.get("css", [])}
    assert files and files <= names
    templates = {str(p.relative_to(ROOT)) for p in (ROOT / "console" / "web" / "templates").rglob("*.html")}
    assert templates and templates <= names
    migrations = {str(p.relative_to(ROOT)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("migrations/0*.py")}
    assert migrations and migrations <= names
    assert not any(n.startswith(("tests/", "frontend/")) for n in names)
    (entry,) = [n for n in names if n.endswith("entry_points.txt")]
    assert "ibconsole = console.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel installed (its dependencies read from ours)."""
    home = tmp_path_factory.mktemp("venv")
    run([sys.executable, "-m", "venv", str(home)])
    run([str(home / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)])
    site = run([str(home / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    (Path(site.stdout.strip()) / "ibconsole_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return home


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, "", ""


def test_a_fresh_virtualenv_runs_ibconsole_up_with_its_frontend(venv, empty_database, tmp_path):
    ibconsole = venv / "bin" / "ibconsole"
    where = run([str(venv / "bin" / "python"), "-c", "import console; print(console.__file__)"], cwd=tmp_path)
    assert where.stdout.startswith(str(venv)), where.stdout  # the wheel's code, not this checkout's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CONSOLE_", "PYTEST"))}
    data = tmp_path / "data"  # does not exist yet: the first start makes it
    env.update(DATABASE_URL=empty_database("wheel"), REDIS_URL="redis://127.0.0.1:6379/13", CONSOLE_DATA_DIR=str(data))
    run([str(ibconsole), "manage", "migrate", "-v", "0"], cwd=tmp_path, env=env)
    run(
        [str(ibconsole), "manage", "operator", "create", "first-op", "--password-stdin"],
        cwd=tmp_path,
        env=env,
        input="a-long-enough-passphrase\n",
    )

    port = _free_port()
    log = (tmp_path / "up.log").open("w")
    up = subprocess.Popen(
        [str(ibconsole), "up", "--no-lab", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        status = 0
        while time.monotonic() < deadline and up.poll() is None:
            try:
                status, _, page = get(f"{base}/login/")
            except OSError:
                status = 0
            if status == 200:
                break
            time.sleep(0.5)
        assert status == 200, (tmp_path / "up.log").read_text()[-3000:]
        # the page loads the built frontend, and the files are served from the installed package
        manifest = json.loads((ROOT / "console" / "web" / "dist" / "manifest.json").read_text())
        main = manifest["src/main.ts"]["file"]
        assert f"/static/{main}" in page
        code, kind, body = get(f"{base}/static/{main}")
        assert code == 200 and "javascript" in kind and len(body) > 1000
        assert data.is_dir()
        banner = (tmp_path / "up.log").read_text()
        assert "No demo data: sign in as an operator" in banner and "alice" not in banner
    finally:
        os.killpg(up.pid, signal.SIGINT)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            raise
        log.close()
    # Ctrl-C stopped every process it started
    assert subprocess.run(["pgrep", "-f", str(venv)], capture_output=True).returncode == 1


def test_a_node_older_than_20_19_is_replaced_by_one_from_pypi(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    for tool, text in (("node", 'echo "18.19.0"'), ("npm", 'echo "9.2.0"')):
        (fake / tool).write_text(f"#!/bin/sh\n{text}\n")
        (fake / tool).chmod(0o755)
    script = (
        "source scripts/node.sh; node_ok node && exit 3; ensure_node; command -v node; node -p process.versions.node"
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PATH": f"{fake}:/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    where, version = done.stdout.split()[-2:]
    assert where == str(ROOT / ".venv" / "bin" / "node")
    major, minor = (int(x) for x in version.split(".")[:2])
    assert (major, minor) >= (20, 19)
