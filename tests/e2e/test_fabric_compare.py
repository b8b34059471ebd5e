"""The fabric page's compare section in the browser says which discovery it compares, when it ran
and how old it is; a stale one shown on request is marked, and the next visit discovers afresh.

Against the lab (OpenSM on ibsim), the live server and Debian's Chromium. Screenshots of the
compare section land in test-artifacts/fabric-compare-*.png.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from playwright.sync_api import expect

from console.fabric.lab.faults import replug, unplug
from tests.fabric.conftest import requires_lab
from tests.fabric.lab_fixtures import ACTOR, lab_data_dir, lab_fabric, su1_revision  # noqa: F401

pytestmark = [
    requires_lab,
    pytest.mark.lab,
    pytest.mark.e2e,
    pytest.mark.timeout(300),
    pytest.mark.django_db(transaction=True),
]
ARTIFACTS = Path("test-artifacts")


def _swept_after(lab, action) -> None:
    mark = lab.sweep_mark()
    action()
    deadline = time.monotonic() + 20
    while not lab.swept_since(mark):
        assert time.monotonic() < deadline, "OpenSM logged no end of sweep"
        time.sleep(0.1)


def test_compare_section_states_the_discovery_time_and_age(lab_fabric, operator, login, live_server, worker):  # noqa: F811
    fabric, lab = lab_fabric("page")
    page = login("op")
    url = f"{live_server.url}/fabrics/{fabric.pk}/"
    page.goto(url)
    section = page.get_by_test_id("discovery")
    expect(page.get_by_test_id("discovered-now")).to_be_visible()
    expect(page.get_by_test_id("discovery-age")).to_have_text(re.compile(r"^\d+\.\d s old$"))
    expect(page.get_by_test_id("discovery-stamp")).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"))
    expect(page.get_by_test_id("compare-verdict")).to_have_text("matches the design")
    ARTIFACTS.mkdir(exist_ok=True)
    section.screenshot(path=ARTIFACTS / "fabric-compare-fresh.png")
    # a cable pulled after that discovery: the stored one, shown on request, is marked stale
    _swept_after(lab, lambda: unplug(fabric, "su01-leaf-r1", 33, actor=ACTOR))
    page.goto(f"{url}?discover=false")
    expect(page.get_by_test_id("discovery-stale")).to_contain_text("may be out of date")
    expect(page.get_by_test_id("discovery-note")).to_contain_text("OpenSM ended a heavy sweep")
    expect(page.get_by_test_id("compare-verdict")).to_have_text("matches the design")
    section.screenshot(path=ARTIFACTS / "fabric-compare-stale.png")
    # and the default visit discovers afresh and shows the missing cable
    page.get_by_role("link", name="Compare a current discovery").click()
    expect(page.get_by_test_id("discovered-now")).to_be_visible()
    expect(page.get_by_test_id("compare-verdict")).to_have_text("differs from the design")
    expect(page.get_by_test_id("fixes")).to_contain_text("connect su01-leaf-r1 port 33 to spine-01 port 1")
    section.screenshot(path=ARTIFACTS / "fabric-compare-current.png")
    replug(fabric, "su01-leaf-r1", 33, actor=ACTOR)
