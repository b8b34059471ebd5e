"""The lab's traffic model against the real lab (OpenSM on ibsim): counters written with
PerformanceSet along OpenSM's forwarding tables come back through the counter reader.

    [spine-01 … spine-08]
    [su01-leaf-r1 … r8]   [su02-leaf-r1 … r8]
     32 nodes (SU 1)       32 nodes (SU 2)
"""

from __future__ import annotations

import time

import pytest

from console.telemetry.collector import CollectorOptions, FabricCollector
from console.telemetry.traffic import Job
from tests.fabric.conftest import requires_lab

pytestmark = [requires_lab, pytest.mark.lab, pytest.mark.timeout(240), pytest.mark.django_db(transaction=True)]


def utilisation_by_tier(fabric, job: Job) -> dict[str, float]:
    collector = FabricCollector(fabric, CollectorOptions(jobs=(job,), store_interval=1e9))
    collector.setup()
    try:
        for _ in range(3):
            collector.sweep()
            time.sleep(0.3)
        peak: dict[str, float] = {}
        for lid, st in collector.last_statuses.items():
            tier = collector.lm.ends[lid].tier
            peak[tier] = max(peak.get(tier, 0.0), st.utilisation)
        assert collector.workload.load.unrouted == 0
        return peak
    finally:
        collector.close()


def test_badly_placed_job_shows_hot_spine_links_and_a_well_placed_one_does_not(lab_fabric, su2_revision):
    fabric, _ = lab_fabric("traffic", su2_revision)
    # given a job inside one scalable unit (rail-aligned ring: rail leaves only)
    good = utilisation_by_tier(fabric, Job("good", ("su01-n01", "su01-n02", "su01-n03")))
    # then its host links are busy and no leaf–spine link carries anything
    assert good["node_leaf"] > 0.4
    assert good["leaf_spine"] < 0.01
    # given the same size of job split across the two scalable units
    bad = utilisation_by_tier(fabric, Job("bad", ("su01-n05", "su02-n05", "su01-n06")))
    # then the ring crosses the spines and OpenSM's routes make those links hot
    assert bad["leaf_spine"] > 0.4
