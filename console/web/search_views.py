"""The search page: ``/search/?q=`` over what the search service finds for this user."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from console.telemetry.search import search
from console.web.context import AuthenticatedHttpRequest, principal_for

#: Facts that are counts: shown as "64 GPUs" rather than "gpus 64".
_UNITS = {"gpus": "GPUs", "nodes": "nodes", "ports": "ports"}


def _fact(key: str, value: object) -> tuple[str, object]:
    if key in _UNITS:
        return "", f"{value} {_UNITS[key]}"
    return key.replace("_", " "), value


@login_required
def search_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Results by kind, each a link; the same results as ``GET /api/search/?q=``."""
    q = request.GET.get("q", "").strip()
    results = search(principal_for(request), q) if q else []
    for hit in results:  # the page words its facts ("port guid", "64 GPUs"); the API keeps the keys
        hit["facts"] = [_fact(k, v) for k, v in hit["fields"].items() if v not in (None, "", {}, [])]
    return render(request, "web/search.html", {"q": q, "results": results, "active": "search"})
