"""The reservation form's submit carries an ``Idempotency-Key`` and retries a lost answer with
the same key: the server made the reservation once, the page shows it, nothing is booked twice.

No lab: a designed fat tree with its inventory; the page talks to the real REST API of a live
server. The lost answer is real: the first POST reaches the server (which commits), then the
browser's connection is dropped before the page reads the answer.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Route, expect

from scheduling.models import Reservation
from tests.scheduling.conftest import give_quota, make_fabric, make_pool

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


def test_a_submit_whose_answer_is_lost_is_retried_with_its_key_and_books_once(
    page, live_server, login, admin_a, tenant_a
):
    fabric = make_fabric("e2e-retry", {"topology": "fat-tree", "nodes": 8, "node_type": "DGX-H100"})
    give_quota(tenant_a, make_pool(fabric, "retry-pool"), 64)
    keys: list[str | None] = []

    def lose_the_first_answer(route: Route) -> None:
        if route.request.method != "POST":
            route.continue_()
            return
        keys.append(route.request.headers.get("idempotency-key"))
        if len(keys) == 1:
            route.fetch()  # the server handles it and commits the reservation
            route.abort("connectionreset")  # the page never sees the 201
        else:
            route.continue_()

    login("admin-a")
    page.goto(f"{live_server.url}/reservations/")
    expect(page.locator("body[data-reservations=ready]")).to_be_attached()
    page.route("**/api/reservations/", lose_the_first_answer)
    page.get_by_test_id("res-name").fill("retried")
    page.get_by_test_id("res-size").fill("8")
    page.get_by_test_id("res-duration").fill("1")
    expect(page.get_by_test_id("preview-state")).to_have_text("placeable")
    page.get_by_test_id("res-submit").click()

    # then the page shows the reservation, with no error, after one retry with the same key
    expect(page.get_by_test_id("reservation").filter(has_text="retried")).to_have_count(1)
    expect(page.get_by_test_id("submit-error")).to_have_text("")
    assert len(keys) == 2 and keys[0] and keys[0] == keys[1]
    assert Reservation.objects.filter(name="retried").count() == 1

    # and the next submit is a new attempt with a new key
    page.unroute("**/api/reservations/")
    keys.clear()
    page.route("**/api/reservations/", lose_the_first_answer)
    page.get_by_test_id("res-name").fill("second")
    page.get_by_test_id("res-submit").click()
    expect(page.get_by_test_id("reservation").filter(has_text="second")).to_have_count(1)
    assert len(keys) == 2 and keys[0] == keys[1]
    assert Reservation.objects.filter(name__in=["retried", "second"]).count() == 2
    page.screenshot(path="test-artifacts/reservation-retry.png")
