"""The subnets a reservation touches, as tenants read them: per fabric its P_Key and whether that
P_Key may still be on the wire (:class:`~scheduling.models.ReservationSubnet`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from scheduling.models import ReservationSubnet


class SubnetView(TypedDict):
    """One subnet of a reservation in the API's words."""

    fabric: str
    site: str | None  # the fabric's site's slug; None: a fabric without a site
    pkey: str  # "0x8123", as the reservation's pkey_hex
    live: bool


def subnets_of(reservation_ids: Iterable[int]) -> dict[int, list[SubnetView]]:
    """The subnets of each reservation (its own fabric first, then by fabric name), one query."""
    out: dict[int, list[SubnetView]] = {pk: [] for pk in reservation_ids}
    rows = (
        ReservationSubnet.objects.filter(reservation_id__in=list(out))
        .order_by("reservation_id", "fabric__name")
        .values_list(
            "reservation_id",
            "fabric_id",
            "reservation__fabric_id",
            "fabric__name",
            "fabric__site__slug",
            "pkey",
            "pkey_live",
        )
    )
    home: dict[int, list[SubnetView]] = {}
    for res_id, fabric_id, own, name, site, pkey, live in rows:
        view = SubnetView(fabric=name, site=site, pkey=f"0x{pkey:04x}", live=live)
        (home.setdefault(res_id, []) if fabric_id == own else out[res_id]).append(view)
    return {pk: home.get(pk, []) + views for pk, views in out.items()}
