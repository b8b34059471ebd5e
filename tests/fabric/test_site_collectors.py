"""One collector per fabric: a fabric that hangs (its simulator frozen, every MAD waiting for its
timeout; a site cut off looks the same) does not stall another fabric's sweeps.

Two labs of the 1-SU design; ``collect_fabrics`` (what ``manage.py collector`` runs) given the
frozen fabric first, as a collector looping over its fabrics in turn would meet it.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from console.telemetry import store
from console.telemetry.collector import CollectorOptions
from console.telemetry.runner import collect_fabrics
from tests.fabric import lab_fixtures
from tests.fabric.conftest import requires_lab
from tests.fabric.pipeline_fixtures import wait_for

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(180), pytest.mark.django_db(transaction=True)]
lab_data_dir = lab_fixtures.lab_data_dir
lab_fabric = lab_fixtures.lab_fabric
su1_revision = lab_fixtures.su1_revision


def test_a_frozen_fabric_does_not_stall_the_other_fabrics_collector(lab_fabric):
    frozen, frozen_lab = lab_fabric("frozen")
    live, _ = lab_fabric("live")
    ibsim = frozen_lab.status()["ibsim_pid"]
    assert ibsim
    # given the frozen fabric's simulator stopped: its discovery waits for the diags' timeout (30 s)
    os.kill(ibsim, signal.SIGSTOP)
    stop = threading.Event()
    options = CollectorOptions(interval=0.5, lab_traffic=False)
    thread = threading.Thread(target=collect_fabrics, args=([frozen, live], options, stop), daemon=True)
    try:
        thread.start()
        # then the live fabric is swept, again and again (its heartbeat lives 5 s past a sweep)
        wait_for(lambda: store.alive(live.pk) and store.load_snapshot(live.pk), timeout=20)
        later = time.monotonic() + 6
        wait_for(lambda: time.monotonic() > later and store.alive(live.pk), timeout=20)
        # while the frozen one has not completed one sweep
        assert not store.alive(frozen.pk)
    finally:
        os.kill(ibsim, signal.SIGCONT)
        stop.set()
        thread.join(60)
    assert not thread.is_alive()
