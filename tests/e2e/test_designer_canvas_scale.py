"""The design canvas at 2,048 and 16,384 GPUs: readable labels at every level, and a diff drawn on it.

Label sizes are measured in the page: ``window.ibcCanvas.labels()`` returns every drawn label with
its on-screen font size (Cytoscape font size x zoom) and whether it is in view; Cytoscape does not
draw a label under its ``min-zoomed-font-size``, so a label under 10 px would be a missing label.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console.tenancy.context import Actor
from console.tenancy.models import Principal
from designer.serialize import graph_to_dict
from designer.services import add_revision, create_design, revision_graph

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

OPTIONS = {"topology": "rail-optimized", "switch": "QM9700", "node_type": "DGX-H100"}
MIN_PX = 10.0
# gpus -> (groups drawn at fabric level, the groups drilled into down to the switches and their
# labels, one leaf of the last, one spine). A 3-level design's pod opens on its scalable units
# (4 a pod of 32 rail leaves: pod 5 holds SUs 17-20), as a 2-level design's fabric does.
SIZES = {
    2048: (9, ["su-3"], ["SU 3"], "su03-leaf-r2", "spine-05"),
    16384: (17, ["pod-5", "su-18"], ["Pod 5", "SU 18"], "su18-leaf-r2", "pod05-spine-03"),
}


def labels(page) -> list[dict]:
    return page.evaluate("window.ibcCanvas.labels()")


def assert_readable(page, must_show: list[str]) -> list[dict]:
    drawn = labels(page)
    in_view = [d for d in drawn if d["inView"]]
    assert in_view, "no label in view"
    smallest = min(drawn, key=lambda d: d["px"])
    assert smallest["px"] >= MIN_PX, f"label {smallest['label']!r} is {smallest['px']:.1f} px on screen"
    shown = " ".join(d["label"] for d in in_view)
    for text in must_show:
        assert text in shown, f"{text!r} not among the labels in view"
    return drawn


def wait_level(page, level: str) -> None:
    expect(page.locator(f"body[data-level={level}][data-canvas=ready]")).to_be_attached(timeout=20_000)


@pytest.mark.parametrize("gpus", sorted(SIZES))
def test_every_level_opens_with_labels_of_at_least_10_px(login, operator, live_server, gpus):
    groups, path, path_labels, leaf, spine = SIZES[gpus]
    design, _ = create_design(
        Actor.for_user(operator), Principal.of(operator), name=f"scale-{gpus}", options={**OPTIONS, "gpus": gpus}
    )
    page = login("op")
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{live_server.url}/designer/{design.id}/")

    # the default level is the aggregated fabric: every group box readable and in view
    wait_level(page, "fabric")
    drawn = assert_readable(page, [path_labels[0], "SU 1" if gpus == 2048 else "Pod 16"])
    boxes = [d for d in drawn if d["inView"] and "\n" in d["label"]]
    assert len(boxes) == groups
    # ... using the canvas, not a strip: the drawing spans most of its width and a good part of its height
    box = page.evaluate("(() => { const b = window.ibcCanvas.extent(); return b; })()")
    size = page.locator("#cy").bounding_box()
    assert box["w"] > 0.6 * size["width"] and box["h"] > 0.25 * size["height"]

    # drill by double-clicking boxes: a pod with SUs opens on them (its SU level: the SUs round
    # the pod's spines), an SU on its switches; every level readable
    for i, (group, label) in enumerate(zip(path, path_labels, strict=True)):
        at = page.evaluate(f"window.ibcCanvas.at('{group}')")
        page.locator("#cy").dblclick(position=at)
        last = i == len(path) - 1
        expect(page.get_by_test_id("breadcrumbs")).to_contain_text(label)
        wait_level(page, "pod" if last else "fabric")
        if not last:
            inner = [f"SU {n}" for n in range(17, 21)]
            assert_readable(page, [*inner, "32 spines"])
    expect(page.get_by_test_id("crumb")).to_have_text(["Fabric", *path_labels])
    assert_readable(page, [spine, leaf])

    # one switch: its faceplate and peers, readable
    for name in (leaf, spine):
        page.get_by_test_id("find-device").fill(name)
        page.get_by_test_id("find-device").press("Enter")
        expect(page.get_by_test_id("port-table-title")).to_have_text(f"Ports of {name}", timeout=20_000)
        wait_level(page, "switch")
        assert_readable(page, [name])


def test_a_diff_of_two_revisions_is_drawn_on_the_canvas(login, operator, live_server):
    actor, principal = Actor.for_user(operator), Principal.of(operator)
    design, first = create_design(actor, principal, name="diff-su1", options={**OPTIONS, "gpus": 256})
    graph = revision_graph(first)
    graph.add_switch("spare-spine", "QM9700", "spine")
    graph.disconnect("su01-leaf-r1", 64)
    graph.connect("su01-leaf-r1", 64, "spare-spine", 1)
    add_revision(actor, principal, design, graph_data=graph_to_dict(graph), message="a spare spine")

    page = login("op")
    page.goto(f"{live_server.url}/designer/{design.id}/r/2/")
    wait_level(page, "pod")
    plain = page.evaluate("window.ibcCanvas.colour('spare-spine')")
    page.get_by_test_id("diff-against").select_option("1")
    page.get_by_test_id("show-diff").click()
    expect(page.locator("body[data-diff='1-2'][data-canvas=ready]")).to_be_attached()

    green = "rgb(46,125,50)"
    assert plain != green
    assert page.evaluate("window.ibcCanvas.colour('spare-spine')") == green
    assert page.evaluate("window.ibcCanvas.colour('su01-leaf-r2')") != green  # untouched switches keep theirs
    assert page.evaluate("window.ibcCanvas.lineColour('spare-spine--su01-leaf-r1')") == green
    legend = page.get_by_test_id("diff-legend")
    expect(legend.get_by_test_id("legend-added")).to_have_text("added: 1 switches, 1 cables")
    expect(legend.get_by_test_id("legend-removed")).to_contain_text("0 switches, 1 cables")
    # the list is still there, and the diff can be left
    expect(page.get_by_test_id("diff-switches-added")).to_contain_text("spare-spine")
    legend.get_by_test_id("diff-clear").click()
    expect(page.locator("body[data-diff=''][data-canvas=ready]")).to_be_attached()
    assert page.evaluate("window.ibcCanvas.colour('spare-spine')") == plain
