"""The browser designer: plan a 1-SU fabric, compare, save, edit the canvas, diff, export."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from console.tenancy.context import Actor
from console.tenancy.models import Principal
from designer.services import create_design
from tests.datafiles import IBNETDISCOVER

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def validation_total(page, key: str):
    return page.get_by_test_id("validation").get_by_test_id(f"sum-{key}-total")


def test_plan_compare_save_edit_revise_diff_and_export(login, operator, live_server):
    page = login("op")
    page.get_by_test_id("nav").get_by_role("link", name="Designer").click()

    # given the default form: 256 GPUs, rail-optimised DGX-H100 on QM9700 = one scalable unit
    page.get_by_test_id("opt-topology").select_option("rail-optimized")
    page.get_by_test_id("opt-size").fill("256")
    page.get_by_test_id("opt-node-type").select_option("DGX-H100")
    page.get_by_test_id("opt-switch").select_option("QM9700")
    preview = page.get_by_test_id("preview")
    expect(preview.get_by_test_id("sum-switches-leaf")).to_have_text("8")
    expect(preview.get_by_test_id("sum-switches-spine")).to_have_text("4")
    expect(preview.get_by_test_id("sum-cables-node_leaf")).to_have_text("256")
    expect(preview.get_by_test_id("sum-cables-leaf_spine")).to_have_text("256")
    # the network's power is labelled as such, and the nodes' is beside it: 32 DGX H100 at
    # NVIDIA's 10.2 kW maximum each (the DGX H100 datasheet) = 326.4 kW
    expect(preview.get_by_text("Network power")).to_be_visible()
    expect(preview.get_by_test_id("sum-compute-power")).to_have_text("326.4 kW")
    network_kw = float(preview.get_by_test_id("sum-power").inner_text().split()[0].replace(",", ""))
    total_kw = float(preview.get_by_test_id("sum-total-power").inner_text().split()[0].replace(",", ""))
    assert abs(total_kw - (network_kw + 326.4)) <= 0.1

    # the preview follows the form instantly, and impossible input explains itself
    page.get_by_test_id("opt-oversubscription").fill("1:2")
    expect(page.get_by_test_id("preview-state")).to_have_text("errors")
    expect(preview.get_by_test_id("issue").first).to_contain_text("more up than down")
    page.get_by_test_id("opt-oversubscription").fill("1:1")
    expect(preview.get_by_test_id("sum-switches-total")).to_have_text("12")

    # comparison: the 1-SU design next to a 2-SU one
    page.get_by_test_id("add-comparison").click()
    page.get_by_test_id("opt-size").fill("512")
    expect(preview.get_by_test_id("sum-switches-leaf")).to_have_text("16")
    page.get_by_test_id("add-comparison").click()
    rows = page.get_by_test_id("comparison-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).get_by_test_id("cmp-switches")).to_have_text("12")
    expect(rows.nth(0).get_by_test_id("cmp-cables")).to_have_text("512")
    page.get_by_test_id("opt-size").fill("256")
    expect(preview.get_by_test_id("sum-switches-leaf")).to_have_text("8")

    # save → the canvas of revision 1
    page.get_by_test_id("design-name").fill("e2e-su1")
    page.get_by_test_id("save-design").click()
    page.wait_for_url(re.compile(r"/designer/\d+/$"))
    design_url = page.url
    expect(page.locator("body[data-canvas=ready]")).to_be_attached()
    expect(page.get_by_test_id("design-title")).to_have_text("e2e-su1")
    expect(page.get_by_test_id("breadcrumbs")).to_contain_text("12 switches")
    expect(page.get_by_test_id("editor")).to_have_attribute("data-ready", "true")
    expect(validation_total(page, "cables")).to_have_text("512")

    # edit: two spare switches, a cable between two free ports, validation reacts
    page.get_by_test_id("add-switch-panel").locator("summary").click()
    for name, tier in (("spare-leaf", "leaf"), ("spare-spine", "spine")):
        page.get_by_test_id("add-switch-name").fill(name)
        page.get_by_test_id("add-switch-tier").select_option(tier)
        page.get_by_test_id("add-switch").click()
    expect(validation_total(page, "switches")).to_have_text("14")
    page.get_by_test_id("connect-a").fill("spare-leaf")
    page.get_by_test_id("connect-a-port").fill("1")
    page.get_by_test_id("connect-b").fill("spare-spine")
    page.get_by_test_id("connect-b-port").fill("1")
    page.get_by_test_id("connect").click()
    expect(page.get_by_test_id("edit-error")).to_have_text("")
    expect(validation_total(page, "cables")).to_have_text("513")
    # a busy port is refused with the free ports named
    page.get_by_test_id("connect-a").fill("spare-leaf")
    page.get_by_test_id("connect-a-port").fill("1")
    page.get_by_test_id("connect-b").fill("spare-spine")
    page.get_by_test_id("connect-b-port").fill("2")
    page.get_by_test_id("connect").click()
    expect(page.get_by_test_id("edit-error")).to_contain_text("already cabled to spare-spine")

    # the switch's port table shows the new cable; disconnect it there
    page.get_by_test_id("find-device").fill("spare-leaf")
    page.get_by_test_id("find-device").press("Enter")
    ports = page.get_by_test_id("port-table")
    expect(ports.get_by_test_id("port-1")).to_contain_text("spare-spine[1]")
    ports.get_by_test_id("port-1").get_by_test_id("disconnect").click()
    dialog = page.get_by_test_id("confirm-dialog")
    expect(dialog.get_by_test_id("confirm-text")).to_have_text(
        "The cable from spare-leaf[1] to spare-spine[1] is removed from this draft."
    )
    expect(dialog.get_by_test_id("confirm-undo")).to_contain_text("Undo")
    dialog.get_by_test_id("confirm-keep").click()
    expect(ports.get_by_test_id("port-1")).to_have_attribute("data-free", "false")
    ports.get_by_test_id("port-1").get_by_test_id("disconnect").click()
    page.get_by_test_id("confirm-act").click()
    expect(validation_total(page, "cables")).to_have_text("512")
    expect(ports.get_by_test_id("port-1")).to_have_attribute("data-free", "true")

    # undo / redo (buttons and keyboard)
    page.get_by_test_id("undo").click()
    expect(validation_total(page, "cables")).to_have_text("513")
    page.locator("#cy").click(position={"x": 5, "y": 5})
    page.keyboard.press("Control+Shift+Z")
    expect(validation_total(page, "cables")).to_have_text("512")
    page.keyboard.press("Control+Z")
    expect(validation_total(page, "cables")).to_have_text("513")
    expect(page.get_by_test_id("edit-count")).to_contain_text("3 edits")

    # save as revision 2 and see the diff against revision 1
    page.get_by_test_id("revision-message").fill("spares")
    page.get_by_test_id("save-revision").click()
    page.wait_for_url(re.compile(r"/designer/\d+/r/2/$"))
    assert page.url.startswith(design_url)
    expect(page.get_by_test_id("revision-number")).to_have_text("r2")
    page.get_by_test_id("diff-against").select_option("1")
    page.get_by_test_id("show-diff").click()
    diff = page.get_by_test_id("diff")
    expect(diff.get_by_test_id("diff-title")).to_have_text("r1 → r2")
    expect(diff.get_by_test_id("diff-switches-added")).to_contain_text("spare-leaf")
    expect(diff.get_by_test_id("diff-switches-added")).to_contain_text("spare-spine")
    expect(diff.get_by_test_id("diff-cables-added")).to_contain_text("spare-leaf[1] – spare-spine[1]")

    # export: the ibnetdiscover topology of revision 2
    with page.expect_download() as info:
        page.get_by_test_id("export-ibnetdiscover").click()
    text = open(info.value.path()).read()
    assert re.search(r"^switchguid=0x[0-9a-f]{16}", text, re.M)
    assert "MF0;spare-leaf:" in text  # the revision's edit is in the file


def test_auditor_sees_the_canvas_read_only(login, auditor, operator, live_server):
    design, _ = create_design(
        Actor.for_user(operator),
        Principal.of(operator),
        name="su1",
        options={"topology": "rail-optimized", "gpus": 256},
    )
    page = login("aud")
    page.goto(f"{live_server.url}/designer/{design.id}/")
    expect(page.locator("body[data-canvas=ready]")).to_be_attached()
    expect(page.get_by_test_id("breadcrumbs")).to_contain_text("12 switches")
    expect(page.get_by_test_id("editor")).to_have_count(0)
    expect(page.get_by_test_id("export-ibnetdiscover")).to_be_visible()
    page.goto(f"{live_server.url}/designer/")
    expect(page.get_by_test_id("save-form")).to_have_count(0)


def test_tenants_do_not_see_the_designer(login, member_a, live_server):
    page = login("member-a")
    assert page.goto(f"{live_server.url}/designer/").status == 404


REAL_DUMP = str(IBNETDISCOVER / "topograph_dgx_h100_ndr_582ca_40sw.ibnetdiscover")


def test_import_a_real_dump_with_a_node_name_map(login, operator, live_server, worker, tmp_path):
    text = open(REAL_DUMP).read()
    leaves = len(set(re.findall(r'^Switch\t\d+ "[^"]+"\t\t# "MF0;([^:]*IBLEAF[^:]*):', text, re.M)))
    spines = len(set(re.findall(r'^Switch\t\d+ "[^"]+"\t\t# "MF0;([^:]*IBSPINE[^:]*):', text, re.M)))
    guid = re.search(r'^caguid=(0x[0-9a-f]+)\nCa\t1 "H-[0-9a-f]+"\t\t# "a08', text, re.M).group(1)
    mapfile = tmp_path / "names.map"
    mapfile.write_text(f'# site names\n{guid} "renamed-node mlx5_0"\n')
    page = login("op")
    page.goto(f"{live_server.url}/designer/")
    page.get_by_test_id("designer-tab-import").click()  # the import has its own page
    form = page.get_by_test_id("import-form")
    form.get_by_test_id("import-name").fill("e2e-topograph")
    form.get_by_test_id("import-dump").set_input_files(REAL_DUMP)
    form.get_by_test_id("import-map").set_input_files(str(mapfile))
    form.get_by_test_id("import-submit").click()
    # 300 KB: over the size imported in a request, so a worker imports it while the page follows
    expect(page.get_by_test_id("import-job-state")).to_be_visible()
    expect(page.get_by_test_id("import-design")).to_have_text("e2e-topograph", timeout=60_000)
    expect(page.get_by_test_id("import-switches")).to_have_text(str(leaves + spines))
    expect(page.get_by_test_id("import-tier-leaf")).to_have_text(str(leaves))
    expect(page.get_by_test_id("import-tier-spine")).to_have_text(str(spines))
    expect(page.get_by_test_id("import-aggregation-nodes")).to_have_text("40")
    warnings = page.get_by_test_id("import-warning")
    kinds = [w.split(" ", 1)[0] for w in warnings.all_inner_texts()]
    assert len(kinds) == len(set(kinds)) and "no-cable" not in kinds
    # the noise (a real dump names no cable types) is folded after them, with its count
    notes = page.get_by_test_id("import-note").all_text_contents()
    assert [n.split(" ", 1)[0] for n in notes] == ["no-cable"]
    # the result has a URL of its own: a reload shows it again, nothing is posted twice
    page.wait_for_url(re.compile(r"/designer/\d+/imported/$"))
    page.reload()
    expect(page.get_by_test_id("import-design")).to_have_text("e2e-topograph")
    page.screenshot(path=str(tmp_path / "import-result.png"), full_page=True)
    page.get_by_test_id("import-open").click()
    page.wait_for_url(re.compile(r"/designer/\d+/$"))
    expect(page.locator("body[data-canvas=ready]")).to_be_attached()

    # a malformed dump is refused with its line number
    bad = tmp_path / "bad.topo"
    bad.write_text('Switch\t8 "S-0002c90200000001"\t\t# "sw" enhanced port 0 lid -1 lmc 0\n')
    page.goto(f"{live_server.url}/designer/import/")
    page.get_by_test_id("import-name").fill("e2e-bad")
    page.get_by_test_id("import-dump").set_input_files(str(bad))
    page.get_by_test_id("import-submit").click()
    expect(page.get_by_test_id("import-error")).to_contain_text("line 1")
