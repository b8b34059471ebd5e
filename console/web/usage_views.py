"""How to use a reservation, as a page and as a downloadable env file (``scheduling.usage_guide``).

Thin: the guide is computed by ``scheduling.usage_guide``; another tenant's reservation is 404
(``_visible_reservation``), operators and auditors read every tenant's.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse

from console.web.reservation_views import READERS, _page, _principal, _visible_reservation
from scheduling.usage_guide import env_file, usage_guide


@login_required
def reservation_use(request: HttpRequest, pk: int) -> HttpResponse:
    """Hosts, Slurm hostlist, SSH targets and the NCCL/UCX variables, with copy buttons."""
    principal = _principal(request, READERS)
    reservation = _visible_reservation(principal, pk)
    guide = usage_guide(reservation)
    return _page(
        request,
        "web/reservation_use.html",
        principal,
        "reserve",
        reservation=reservation,
        guide=guide,
        env_text=env_file(guide),
    )


@login_required
def reservation_use_env(request: HttpRequest, pk: int) -> HttpResponse:
    """The same as ``KEY=VALUE`` lines, downloaded as ``res-<id>.env``."""
    principal = _principal(request, READERS)
    reservation = _visible_reservation(principal, pk)
    response = HttpResponse(env_file(usage_guide(reservation)), content_type="text/plain")
    response["Content-Disposition"] = f'attachment; filename="{reservation.partition_name}.env"'
    return response
