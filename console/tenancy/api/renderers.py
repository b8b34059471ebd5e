"""The browsable API without a view into other tenants.

DRF's HTML forms offer every related object as a choice and django-filter's forms every tenant
to filter by: a tenant's browser would list the other tenants (and, through them, nothing it may
see). For a principal confined to one tenant the HTML and filter forms are left out; the response
itself and the raw JSON form (the same data the JSON renderer answers) stay.
"""

from __future__ import annotations

from typing import Any

from rest_framework.renderers import BrowsableAPIRenderer
from rest_framework.request import Request

from console.tenancy.permissions import principal_of


def _confined(request: Request) -> bool:
    return not principal_of(request).sees_all_tenants


class ScopedBrowsableAPIRenderer(BrowsableAPIRenderer):
    """:class:`BrowsableAPIRenderer` whose forms list other tenants' objects only to those who
    see all tenants (operators, auditors)."""

    def get_rendered_html_form(self, data: Any, view: Any, method: str, request: Request) -> Any:
        if _confined(request):
            return None
        return super().get_rendered_html_form(data, view, method, request)

    def get_filter_form(self, data: Any, view: Any, request: Request) -> Any:
        if _confined(request):
            return None
        return super().get_filter_form(data, view, request)
