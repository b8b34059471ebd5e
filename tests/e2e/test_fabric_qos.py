"""The QoS page in the browser: an operator changes a weight, sees the pending diff and the ports a
push reprograms, and previews the change on the change page. Screenshots (1600×1000, Chromium) in
test-artifacts/qos/."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect

from console.fabric.models import ChangeRequest, Fabric, FabricQos
from tests.fabric.lab_fixtures import su1_revision  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "qos"


def test_the_operator_edits_the_qos_table_and_previews_the_change(login, operator, su1_revision, live_server, page):  # noqa: F811
    fabric = Fabric.objects.create(name="qos-e2e", driver="lab", revision=su1_revision, config={"workdir": "/none"})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_viewport_size({"width": 1600, "height": 1000})
    SHOTS.mkdir(parents=True, exist_ok=True)
    login("op")

    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/?discover=false")
    page.get_by_test_id("fabric-qos-link").click()
    expect(page.get_by_test_id("qos-default")).to_have_text("default table")
    expect(page.get_by_test_id("qos-affected")).to_contain_text("768 switch ports and 256 HCA ports")
    page.get_by_label("training weight").fill("160")
    page.get_by_label("inference VL").fill("3")
    page.get_by_test_id("qos-save").click()
    expect(page.get_by_test_id("qos-default")).to_have_text("saved table")
    expect(page.get_by_test_id("qos-rendered")).to_contain_text("qos_vlarb_high 3:64")
    expect(page.get_by_test_id("qos-diff")).to_contain_text("+qos_vlarb_low 0:64,1:160")
    page.screenshot(path=str(SHOTS / "qos.png"), full_page=True)
    assert FabricQos.objects.get(fabric=fabric).table["classes"]["training"]["weight"] == 160

    # out-of-range numbers the browser refuses itself (min/max); the server names what it refuses
    page.get_by_label("inference SL").fill("1")
    page.get_by_test_id("qos-save").click()
    expect(page.get_by_test_id("qos-errors")).to_contain_text("inference: SL 1 already used by training")
    page.screenshot(path=str(SHOTS / "qos-refused.png"))
    assert FabricQos.objects.get(fabric=fabric).table["classes"]["inference"]["sl"] == 2

    page.goto(f"{live_server.url}/fabrics/{fabric.pk}/qos/")
    page.get_by_test_id("qos-preview").click()
    expect(page.get_by_test_id("change-diff")).to_contain_text("+qos_sl2vl 0,1,3")
    page.screenshot(path=str(SHOTS / "qos-preview.png"))
    assert ChangeRequest.objects.get(fabric=fabric).dry_run
    assert not errors
