"""The CSV of a fabric's change list: the rows the page's filters and ordering give (the page keeps
its own sort links, driven by the API filterset's ``ordering``)."""

from __future__ import annotations

import django_tables2 as tables

from console.fabric.models import ChangeRequest
from console.web.tables import ConsoleTable, YesNoColumn


class ChangeTable(ConsoleTable):
    id = tables.Column(verbose_name="Change")
    status = tables.Column(verbose_name="Status")
    dry_run = YesNoColumn(verbose_name="Dry run")
    opensm_restarted = YesNoColumn(verbose_name="Restarted OpenSM")
    reason = tables.Column(verbose_name="Reason", default="")
    requested_by_label = tables.Column(verbose_name="Requested by", default="system")
    created_at = tables.DateTimeColumn(verbose_name="Requested (UTC)", format=r"Y-m-d H:i:s \U\T\C")
    finished_at = tables.DateTimeColumn(verbose_name="Finished (UTC)", format=r"Y-m-d H:i:s \U\T\C", default="")
    error = tables.Column(verbose_name="Error", default="")

    class Meta(ConsoleTable.Meta):
        orderable = False  # the queryset comes ordered by the page's filterset

    def value_status(self, record: ChangeRequest) -> str:
        return str(record.get_status_display())
