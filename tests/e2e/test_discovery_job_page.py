"""The fabric page follows a discovery job in the browser: queued with its state, the page
refreshing itself (no script) until the worker is done, then the comparison. Against the lab,
the live server and Debian's Chromium; the screenshot lands in test-artifacts/."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from console.fabric.discovery import jobs
from console.fabric.models import DiscoveryJob
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import lab_data_dir, lab_fabric, su1_revision  # noqa: F401

pytestmark = [
    requires_lab,
    pytest.mark.lab,
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.django_db(transaction=True),
]
ARTIFACTS = Path("test-artifacts")


def run_and_close(job_id: int) -> None:
    from django.db import connection

    try:
        jobs.run(job_id)
    finally:
        connection.close()


def test_the_page_follows_a_queued_discovery_until_it_is_compared(
    lab_fabric,  # noqa: F811
    operator,
    login,
    live_server,
    settings,
):
    fabric, _ = lab_fabric("jobpage")
    settings.FABRIC_COMPARE_WAIT_S = 0  # no worker yet: the page answers at once with the job
    page = login("op")
    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/?discover=false")
    page.get_by_test_id("run-discovery").click()
    job = DiscoveryJob.objects.get(fabric=fabric)
    expect(page.get_by_test_id("discovery-job")).to_contain_text(f"Discovery job {job.pk} queued")
    ARTIFACTS.mkdir(exist_ok=True)
    page.get_by_test_id("discovery").screenshot(path=ARTIFACTS / "fabric-discovery-job-queued.png")
    # the worker's side, on a thread of its own as a worker's (it asks the lab's agent; this
    # thread runs Playwright's event loop)
    worker = threading.Thread(target=run_and_close, args=(job.pk,))
    worker.start()
    worker.join(60)
    # the page refreshes itself (every 2 s) and shows the job done and the comparison
    expect(page.get_by_test_id("discovery-job")).to_contain_text(f"Discovery job {job.pk} done", timeout=10_000)
    expect(page.get_by_test_id("compare-verdict")).to_have_text("matches the design")
    page.get_by_test_id("discovery").screenshot(path=ARTIFACTS / "fabric-discovery-job-done.png")
