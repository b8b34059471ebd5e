"""The ports page's table and filters: every discovered port with its live counters
(rows from :func:`console.telemetry.porttable.port_rows`, a list, filtered here in Python)."""

from __future__ import annotations

from typing import Any

import django_tables2 as tables
from django import forms

from console.telemetry.core import ERROR_COUNTERS
from console.telemetry.porttable import PortRow
from console.web.tables import ConsoleTable

STATES = [("", "any"), ("Active", "Active"), ("Down", "Down"), ("no data", "no data")]


class PortFilterForm(forms.Form):
    switch = forms.CharField(required=False, label="Switch or node name")
    state = forms.ChoiceField(required=False, choices=STATES, label="State")
    with_errors = forms.BooleanField(required=False, label="Errors only")
    congested = forms.BooleanField(required=False, label="Congested only (PortXmitWait > 0 ticks/s)")


class PortFilter:
    """The filter form (``form``, what ``table_context`` shows) and the rows it keeps."""

    def __init__(self, data: Any) -> None:
        self.form = PortFilterForm(data)

    def apply(self, rows: list[PortRow]) -> list[PortRow]:
        if not self.form.is_valid():
            return []
        chosen = self.form.cleaned_data
        text = chosen["switch"].strip().lower()
        return [
            row
            for row in rows
            if (not text or text in row.device.lower())
            and (not chosen["state"] or row.state == chosen["state"])
            and (not chosen["with_errors"] or row.error_total > 0)
            and (not chosen["congested"] or (row.xmit_wait or 0) > 0)
        ]


#: Short headings for the error counters (the full PortCounters name is the heading's title).
ERROR_HEADINGS = {
    "SymbolErrorCounter": "Symbol errors",
    "LinkDownedCounter": "Link downed",
    "LinkErrorRecoveryCounter": "Error recoveries",
    "PortRcvErrors": "Rcv errors",
    "PortXmitDiscards": "Xmit discards",
}
NOWRAP = {"td": {"class": "nowrap"}}


class ErrorColumn(tables.Column):
    """One PortCounters error counter's total (a count) at the link's measuring port."""

    def __init__(self, counter: str) -> None:
        heading = ERROR_HEADINGS.get(counter, counter)
        super().__init__(
            accessor=f"errors__{counter}", verbose_name=f"{heading} (count)", attrs={"th": {"title": counter}}
        )


class PortTable(ConsoleTable):
    device = tables.Column(verbose_name="Switch or node", attrs=NOWRAP)
    kind = tables.Column(verbose_name="Kind")
    port = tables.Column(verbose_name="Port")
    peer = tables.Column(verbose_name="Peer", order_by=("peer", "peer_port"), attrs=NOWRAP)
    state = tables.Column(verbose_name="State")
    width = tables.Column(verbose_name="Width (lanes)")
    speed = tables.Column(verbose_name="Speed")
    util_pct = tables.Column(verbose_name="Utilisation (%)", attrs=NOWRAP)
    xmit_wait = tables.Column(verbose_name="Xmit wait (ticks/s)", attrs=NOWRAP)
    error_total = tables.Column(verbose_name="Errors (count)")

    class Meta(ConsoleTable.Meta):
        attrs = {**ConsoleTable.Meta.attrs, "data-testid": "port-table"}
        empty_text = "No ports match (is there a discovery yet?)."
        row_attrs = {
            "data-testid": "port-row",
            "data-port": lambda record: f"{record.device}/{record.port}",
            "data-state": lambda record: record.state,
        }
        order_by = ("device", "port")

    def __init__(self, data: list[PortRow], **kwargs: Any) -> None:
        extra = [(f"err_{name}", ErrorColumn(name)) for name in ERROR_COUNTERS]
        super().__init__(data, extra_columns=extra, **kwargs)

    def render_peer(self, record: PortRow) -> str:
        return f"{record.peer}/{record.peer_port}"

    def value_peer(self, record: PortRow) -> str:
        return f"{record.peer}/{record.peer_port}"

    def render_util_pct(self, value: float) -> str:
        return f"{value:.1f} %"

    def value_util_pct(self, value: float | None) -> str:
        return "" if value is None else f"{value:.1f}"

    def render_xmit_wait(self, value: int) -> str:
        return f"{value:,} ticks/s"

    def value_xmit_wait(self, value: int | None) -> str:
        return "" if value is None else str(value)
