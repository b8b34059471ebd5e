"""Sites and the links between them: the operator's writes (create, change, delete; audited) and
the figures the Sites page shows.

Every write checks the operator role, validates precisely (``Invalid``, 400, naming the field)
and records its audit row in the same transaction. A link is stored once per unordered pair
(``a`` < ``b`` by id): whichever order the operator names the two sites in, the same row is meant.
A site holding fabrics (or tenants' datasets) is not deleted: ``Conflict`` (409) says what is
still there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Sum
from django.utils import timezone

from console.fabric.models import Fabric, Site, SiteLink
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Invalid
from console.tenancy.models import Principal
from console.tenancy.permissions import require_operator

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
SITE_FIELDS = ("name", "slug", "description", "location")
LINK_FIELDS = ("kind", "latency_us", "bandwidth_gbps", "source", "measured_at")


def _validate_site(values: dict[str, Any]) -> None:
    name = str(values.get("name") or "").strip()
    if not name:
        raise Invalid("a site needs a name", fields={"name": ["required"]})
    slug = str(values.get("slug") or "")
    if not SLUG_RE.match(slug):
        detail = "lower-case letters, digits and dashes, at most 40 (it names the queue site.<slug>)"
        raise Invalid(f"slug {slug!r}: {detail}", fields={"slug": [detail]})


def create_site(actor: Actor, principal: Principal, **values: Any) -> Site:
    """Register a site (a data centre: its fabrics, its workers' queue ``site.<slug>``)."""
    require_operator(principal, to="change sites")
    values = {k: v for k, v in values.items() if k in SITE_FIELDS}
    _validate_site(values)
    try:
        with transaction.atomic():
            site = Site.objects.create(**values)
            audit.record(actor, "site.create", site, after=audit.snapshot(site))
    except IntegrityError as exc:
        raise Conflict(f"a site named {values.get('name')!r} or with slug {values.get('slug')!r} exists") from exc
    return site


def update_site(actor: Actor, principal: Principal, site: Site, **values: Any) -> Site:
    """Change a site's name, slug, description or location."""
    require_operator(principal, to="change sites")
    try:
        with transaction.atomic():
            site = Site.objects.select_for_update().get(pk=site.pk)
            before = audit.snapshot(site)
            for key, value in values.items():
                if key in SITE_FIELDS:
                    setattr(site, key, value)
            _validate_site({"name": site.name, "slug": site.slug})
            site.save()
            audit.record(actor, "site.update", site, before=before, after=audit.snapshot(site))
    except IntegrityError as exc:
        raise Conflict("another site has that name or slug") from exc
    return site


def delete_site(actor: Actor, principal: Principal, site: Site) -> None:
    """Forget a site with no fabric and no dataset left (its links go with it)."""
    require_operator(principal, to="change sites")
    with transaction.atomic():
        site = Site.objects.select_for_update().get(pk=site.pk)
        fabrics = sorted(Fabric.objects.filter(site=site).values_list("name", flat=True))
        if fabrics:
            raise Conflict(
                f"site {site.name!r} still has fabrics: {', '.join(fabrics)}; move or delete them first",
                fields={"fabrics": fabrics},
            )
        datasets = site.datasets.count()  # reverse of scheduling.Dataset.site
        if datasets:
            raise Conflict(f"site {site.name!r} still has {datasets} tenant dataset(s) registered at it")
        audit.record(actor, "site.delete", site, before=audit.snapshot(site))
        site.delete()


def _pair(a: Site, b: Site) -> tuple[Site, Site]:
    if a.pk == b.pk:
        raise Invalid("a link joins two different sites", fields={"b": ["the same site as a"]})
    return (a, b) if a.pk < b.pk else (b, a)


def _validate_link(values: dict[str, Any]) -> None:
    latency, bandwidth = values.get("latency_us"), values.get("bandwidth_gbps")
    if latency is None or latency < 0:
        raise Invalid("latency is zero or more microseconds", fields={"latency_us": ["must be ≥ 0"]})
    if bandwidth is None or bandwidth <= 0:
        raise Invalid("bandwidth is more than 0 Gb/s", fields={"bandwidth_gbps": ["must be > 0"]})
    if values.get("kind", SiteLink.Kind.ETHERNET) not in SiteLink.Kind.values:
        raise Invalid(f"kind is one of {', '.join(SiteLink.Kind.values)}", fields={"kind": ["unknown"]})


def _link_repr(a: Site, b: Site) -> str:
    return f"{a.name} – {b.name}"


def create_link(actor: Actor, principal: Principal, *, a: Site, b: Site, **values: Any) -> SiteLink:
    """Join two sites (named in any order) by a link of a kind, latency and bandwidth."""
    require_operator(principal, to="change site links")
    a, b = _pair(a, b)
    values = {k: v for k, v in values.items() if k in LINK_FIELDS}
    _validate_link(values)
    if values.get("source") == SiteLink.Source.MEASURED and not values.get("measured_at"):
        values["measured_at"] = timezone.now()
    try:
        with transaction.atomic():
            link = SiteLink.objects.create(a=a, b=b, **values)
            audit.record(actor, "site_link.create", link, object_repr=_link_repr(a, b), after=audit.snapshot(link))
    except IntegrityError as exc:
        raise Conflict(f"{_link_repr(a, b)} are already linked; change that link instead") from exc
    return link


def update_link(actor: Actor, principal: Principal, link: SiteLink, **values: Any) -> SiteLink:
    """Change a link's kind, latency or bandwidth (entered, or measured with its time)."""
    require_operator(principal, to="change site links")
    with transaction.atomic():
        link = SiteLink.objects.select_for_update().select_related("a", "b").get(pk=link.pk)
        before = audit.snapshot(link)
        a, b = _pair(values.pop("a", link.a), values.pop("b", link.b))
        if (a.pk, b.pk) != (link.a_id, link.b_id):
            raise Invalid("a link's sites do not change: delete it and link the new pair", fields={"a": [], "b": []})
        for key, value in values.items():
            if key in LINK_FIELDS:
                setattr(link, key, value)
        _validate_link({"latency_us": link.latency_us, "bandwidth_gbps": link.bandwidth_gbps, "kind": link.kind})
        if link.source == SiteLink.Source.MEASURED and "measured_at" not in values:
            link.measured_at = timezone.now()
        link.save()
        audit.record(
            actor, "site_link.update", link, object_repr=_link_repr(a, b), before=before, after=audit.snapshot(link)
        )
    return link


def delete_link(actor: Actor, principal: Principal, link: SiteLink) -> None:
    """Forget how two sites are joined."""
    require_operator(principal, to="change site links")
    with transaction.atomic():
        audit.record(
            actor, "site_link.delete", link, object_repr=_link_repr(link.a, link.b), before=audit.snapshot(link)
        )
        link.delete()


@dataclass(frozen=True)
class SiteFigures:
    """One site as the Sites page shows it: its fabrics with their nodes and GPUs."""

    site: Site | None  # None: the fabrics without a site (each a site of its own)
    fabrics: list[dict[str, Any]]

    @property
    def nodes(self) -> int:
        return sum(f["nodes"] for f in self.fabrics)

    @property
    def gpus(self) -> int:
        return sum(f["gpus"] for f in self.fabrics)


def site_figures() -> list[SiteFigures]:
    """Every site with its fabrics, nodes and GPUs (two queries), then the fabrics without a site."""
    sites = list(Site.objects.order_by("name"))
    fabrics = (
        Fabric.objects.order_by("name")
        .annotate(
            node_count=Count("nodes", distinct=True),
            gpu_count=Sum("nodes__gpus"),
        )
        .values("id", "name", "site_id", "driver", "node_count", "gpu_count")
    )
    by_site: dict[int | None, list[dict[str, Any]]] = {}
    for row in fabrics:
        entry = {"id": row["id"], "name": row["name"], "driver": row["driver"]}
        entry |= {"nodes": row["node_count"], "gpus": int(row["gpu_count"] or 0)}
        by_site.setdefault(row["site_id"], []).append(entry)
    out = [SiteFigures(site, by_site.get(site.pk, [])) for site in sites]
    if by_site.get(None):
        out.append(SiteFigures(None, by_site[None]))
    return out
