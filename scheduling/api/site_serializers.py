"""The multi-site fields of a reservation request and of a reservation (issue 20).

Request: ``near`` (a site slug or name, or ``dataset:<name>`` of the requesting tenant) and
``span_sites``. Reservation: ``near`` (echo), ``span_sites``, ``site`` (the site it landed on,
for a spanning one the site of its ``fabric``) and ``sites`` (every site it touches).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduling.models import Reservation


class SiteRequestFields(serializers.Serializer):
    """``near`` and ``span_sites`` of a reservation request."""

    near = serializers.CharField(
        max_length=120,
        required=False,
        allow_blank=True,
        default="",
        help_text='where its data or users are: a site (slug or name) or "dataset:<name>" of your tenant; '
        "placement puts the gang on the nearest site that can hold it now or, within max_wait, soonest",
    )
    span_sites = serializers.BooleanField(
        default=False,
        help_text="the gang may span sites when no single site can hold it in time; the explanation then "
        "reports the inter-site cost of a ring all-reduce",
    )


def near_of(reservation: Reservation) -> str | None:
    """What the reservation was asked to be near, as it would be asked again."""
    if reservation.near_dataset_id is not None and reservation.near_dataset is not None:
        return f"dataset:{reservation.near_dataset.name}"
    if reservation.near_site_id is not None and reservation.near_site is not None:
        return reservation.near_site.slug
    return None


def site_of(reservation: Reservation) -> str | None:
    """The slug of its fabric's site (``None``: a fabric without a site)."""
    site = reservation.fabric.site if reservation.fabric_id is not None else None
    return site.slug if site is not None else None


def sites_of(reservation: Reservation) -> list[str]:
    """Every site it touches: the placement's (a pool at several sites), else its fabric's."""
    placed = (reservation.placement or {}).get("sites")
    if isinstance(placed, list):
        return [str(s) for s in placed]
    site = site_of(reservation)
    return [site] if site else []


class SiteReservationFields(serializers.Serializer):
    """``near``, ``site`` and ``sites`` of a reservation (``span_sites`` is its model field)."""

    near = serializers.SerializerMethodField()
    site = serializers.SerializerMethodField()
    sites = serializers.SerializerMethodField()

    @extend_schema_field(serializers.CharField(allow_null=True, help_text="the near asked, or null"))
    def get_near(self, reservation: Reservation) -> str | None:
        return near_of(reservation)

    @extend_schema_field(
        serializers.CharField(
            allow_null=True, help_text="slug of the site it landed on (spanning: of its fabric); null: no site"
        )
    )
    def get_site(self, reservation: Reservation) -> str | None:
        return site_of(reservation)

    @extend_schema_field(
        serializers.ListField(child=serializers.CharField(), help_text="slugs of the sites it touches")
    )
    def get_sites(self, reservation: Reservation) -> list[Any]:
        return sites_of(reservation)


#: What the reservation views read with each row for these fields (no query per row).
SITE_RELATED = ("fabric__site", "near_site", "near_dataset")
