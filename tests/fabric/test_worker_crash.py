"""``kill -9`` of the Celery worker in the middle of a push: the change completes exactly once.

A real ``celery -A console worker`` subprocess on Redis, using this test run's database (the
``test_…`` database pytest-django created; ``transaction=True`` so the worker sees committed
rows). A test-only hook in ``fabric.config`` pauses the first attempt after the swap and before
the SIGHUP, the worst moment: the file is live but OpenSM has not read it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from console.fabric import changes
from console.fabric.changes.pipeline import lease_seconds, reap_stuck_changes
from console.fabric.models import AppliedState, ChangeRequest, ChangeStep
from console.fabric.tasks import apply_change_task
from console.tenancy.models import AuditEntry
from tests.conftest import flush_broker
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import with_agent
from tests.fabric.pipeline_fixtures import *  # noqa: F403
from tests.fabric.pipeline_fixtures import OPERATOR, SYSTEM, hca_guids, lids, wait_for

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(240), pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
# What a Celery worker logs (INFO) when it gets a task, and when the task returns (with the repr
# of its result).
RECEIVED = re.compile(r"Task fabric\.apply_change\[([0-9a-f-]+)\] received")
SUCCEEDED = re.compile(r"Task fabric\.apply_change\[([0-9a-f-]+)\] succeeded in [0-9.e-]+s: (.*)")


def test_database_url() -> str:
    """The URL of the database this test run uses (``test_<name>``), for the subprocess."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


test_database_url.__test__ = False  # a helper, not a test


class Worker:
    """One ``celery -A console worker`` process (solo pool) in its own process group, consuming
    ``queues`` (comma-separated; default: the default queue), with ``env`` added to its environment."""

    def __init__(self, name: str, log: Path, *, queues: str = "", env: dict[str, str] | None = None) -> None:
        env = dict(
            os.environ,
            DATABASE_URL=test_database_url(),
            REDIS_URL=settings.REDIS_URL,
            CELERY_QUEUE=settings.CELERY_TASK_DEFAULT_QUEUE,
            PYTHONUNBUFFERED="1",
            LOG_LEVEL="DEBUG",  # the task received/succeeded lines this test reads (quiet otherwise)
            **(env or {}),
        )
        self.log = log
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "--pool",
                "solo",
                "-n",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                "-l",
                "INFO",
                *(["-Q", queues] if queues else []),
            ],
            cwd=ROOT,
            env=env,
            stdout=open(log, "ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(lambda: "ready." in log.read_text(errors="replace") or self._died(), timeout=60)
        assert self.proc.poll() is None, log.read_text()[-2000:]

    def _died(self) -> bool:
        return self.proc.poll() is not None

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@pytest.fixture
def workers(tmp_path):
    flush_broker()  # this run's own Redis db: no stale tasks (the agents' sockets kept)
    started: list[Worker] = []

    def start(name: str) -> Worker:
        w = Worker(name, tmp_path / f"{name}.log")
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


def tasks_received(log: Path) -> list[str]:
    """Ids of the ``fabric.apply_change`` tasks a worker got, in order."""
    return RECEIVED.findall(log.read_text(errors="replace"))


def task_runs(log: Path) -> dict[str, str]:
    """``fabric.apply_change`` tasks a worker finished, by task id: the repr of what each returned."""
    return dict(SUCCEEDED.findall(log.read_text(errors="replace")))


def reap_until_requeued(timeout: float) -> dict[str, list[int]]:
    """Run the reaper (as beat does) until it requeues something; its answer then."""
    answers: list[dict[str, list[int]]] = []
    wait_for(lambda: answers.append(reap_stuck_changes()) or answers[-1]["requeued"], timeout=timeout, interval=0.2)
    return answers[-1]


def test_kill_9_mid_push_then_restart_completes_exactly_once(start_lab, make_fabric, workers, lab_console):
    lab = start_lab("crash")
    fabric = make_fabric(
        "crash-lab",
        workdir=str(lab.workdir),
        verify_timeout=8,
        lease_seconds=4,
        test_hooks={"pause_before": {"reload": 120}, "pause_attempts": [1]},
    )
    with_agent(fabric, lab_console)
    flush_broker()  # (the reconcile the agent's hello asked for: not this test's change)
    g = hca_guids(lab)
    first = workers("crash-a")
    # given a change being pushed by worker A, paused after the swap and before the SIGHUP
    changes.set_partition(
        SYSTEM,
        OPERATOR,
        fabric,
        name="res-7",
        pkey="0x0011",
        members=[f"{g['hca01']:#018x}", f"{g['hca02']:#018x}=limited"],
    )
    change = changes.request_change(SYSTEM, OPERATOR, fabric, reason="crash test")
    wait_for(lambda: ChangeStep.objects.filter(change=change, name="reload", status="running").exists(), timeout=60)
    assert "res-7=0x0011" in lab.artefacts.read("partitions.conf")  # swapped, not yet reloaded
    held = ChangeRequest.objects.get(pk=change.pk)
    assert held.attempts == 1 and held.lease_owner.startswith("crash-a@"), held.lease_owner
    [first_task] = tasks_received(first.log)
    assert first_task.startswith(held.lease_owner.rsplit("/", 1)[1])  # the lease is A's task's (maybe cut)
    # when the worker is killed -9 and a new one starts
    first.kill9()
    assert ChangeRequest.objects.get(pk=change.pk).status == "applying"
    second = workers("crash-b")
    # then the reaper leaves the change alone while A's lease lives, and requeues it once it expired
    assert reap_stuck_changes(now=held.lease_expires_at - timedelta(seconds=1))["requeued"] == []
    reaped = reap_until_requeued(timeout=lease_seconds(fabric) + 30)
    assert reaped["requeued"] == [change.pk], reaped
    # and the change completes on worker B, by another task than A's, exactly once
    done = wait_for(lambda: (c := ChangeRequest.objects.get(pk=change.pk)).is_terminal and c, timeout=60)
    assert done.status == "applied", (done.error, list(done.steps.values("name", "status", "log")))
    assert done.attempts == 2
    runs = wait_for(lambda: task_runs(second.log), timeout=30)
    assert list(runs.values()) == ["'applied'"] and first_task not in runs, runs
    assert not task_runs(first.log)  # A never finished anything
    lost = done.steps.get(name="reload", status="failed")
    assert "worker lost" in lost.log
    attempt2 = [s.name for s in done.steps.filter(seq__gt=lost.seq)]
    # the push went on on the agent while A's pipeline waited (the pause is the worker's): the
    # second attempt pushes the same files again (set-style) and verifies; the fabric's keys, if
    # the first attempt's opensm.conf was not yet the applied one, are set again first
    assert [s for s in attempt2 if s != "conf"] == ["render", "lint", "swap", "reload", "verify"], attempt2
    assert lab.diags().pkeys(lids(lab)["hca02"]).membership(0x0011) == "limited"
    assert AppliedState.objects.get(fabric=fabric).change_id == change.pk
    # a redelivered copy of the task (what the broker does after the visibility timeout) runs on
    # worker B and is a no-op
    copy = apply_change_task.apply_async(kwargs={"change_id": change.pk})
    assert wait_for(lambda: task_runs(second.log).get(copy.id), timeout=30) == "None"
    assert AuditEntry.objects.filter(action="fabric.change.applied", object_id=str(change.pk)).count() == 1
    assert AuditEntry.objects.filter(action="fabric.change.requeue").count() == 1
    assert not ChangeRequest.objects.exclude(status__in=ChangeRequest.TERMINAL).exists()
    assert ChangeRequest.objects.get(pk=change.pk).attempts == 2
