"""The repository is self-contained: no tracked file names a path outside it (a machine's shared
folder, an absolute path of this checkout); what the tests, benchmarks and demo read is in it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Paths that leave the repository: this machine's work tree, the sibling reference folder, or
#: this checkout's own absolute path (wherever it is cloned). Spelt in pieces so that this file
#: does not name them itself; /tmp stays allowed (tests write artefacts there).
OUTSIDE = re.compile("|".join([r"/" + "work" + r"/", r"\.\./" + "shared" + r"\b", re.escape(str(ROOT)) + "/"]))
#: Third-party data keeps its own text (manual pages and dumps name /usr/… and the like).
KEPT_AS_IS = ("tests/data/",)


def test_no_tracked_file_names_a_path_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert len(files) > 100
    offenders = []
    for name in files:
        if name.startswith(KEPT_AS_IS):
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()[:120]}")
    assert offenders == [], "\n".join(offenders)


def test_the_data_the_tests_read_is_here_with_its_sources():
    from tests import datafiles

    for folder in (datafiles.IBNETDISCOVER, datafiles.REALDATA / "slurm_k8s_topology", datafiles.TRACES):
        assert (folder / "SOURCES.md").is_file(), folder
    assert (
        datafiles.KALOS.is_file()
        and (datafiles.IBNETDISCOVER / "psmn_x5_voltaire_qdr_89ca_11sw.ibnetdiscover").is_file()
    )


def test_the_data_reading_tests_pass_from_a_copy_with_nothing_beside_it(tmp_path):
    """The tracked files alone, in a directory with no sibling anything: the tests that read real
    dumps and traces run there (SQLite, so they need no server and share nothing with this run)."""
    import os
    import sys

    from tests.servers import copy_tracked

    copy = copy_tracked(tmp_path / "alone" / "ib-console")
    assert not any(p.name != "ib-console" for p in copy.parent.iterdir())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "PYTEST", "CONSOLE_"))}
    env["CONSOLE_DATA_DIR"] = str(tmp_path / "data")
    tests = ["tests/designer/test_import_realdata.py", "tests/scheduling/test_traces.py"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-o", "addopts=", *tests],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-1500:]
