"""The Sites page (operators; auditors read) and the Datasets page (every signed-in role).

Sites: each site with its fabrics and their nodes and GPUs, the links between sites (kind,
latency, bandwidth, entered or measured), and for operators the forms to add or change a site
and a link (posting an existing pair changes that link). Datasets: a tenant's datasets at sites
(register, delete); operators and auditors see every tenant's, operators register for a tenant.
Thin: :mod:`console.fabric.site_admin` and :mod:`scheduling.services.datasets` validate and
audit; their refusals are shown on the form.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.fabric import site_admin
from console.fabric.models import Site, SiteLink
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Role, Tenant
from console.web.context import principal_for, refuse_readers
from scheduling.models import Dataset
from scheduling.services import datasets

READERS = {Role.OPERATOR, Role.AUDITOR}


class SiteForm(forms.ModelForm):
    class Meta:
        model = Site
        fields = ["name", "slug", "location", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}
        # Django renders help text as HTML: no angle brackets.
        help_texts = {
            "slug": "lower-case letters, digits and dashes; names the site's worker queue (slug north: site.north)"
        }

    def validate_unique(self) -> None:
        """The service answers duplicates (with the name and slug in its message)."""


class LinkForm(forms.Form):
    a = forms.ModelChoiceField(queryset=Site.objects.all(), label="Site", to_field_name="slug")
    b = forms.ModelChoiceField(queryset=Site.objects.all(), label="Other site", to_field_name="slug")
    kind = forms.ChoiceField(choices=SiteLink.Kind.choices, initial=SiteLink.Kind.ETHERNET)
    latency_us = forms.FloatField(min_value=0, label="One-way latency (µs)")
    bandwidth_gbps = forms.FloatField(min_value=0.001, label="Bandwidth (Gb/s)")
    source = forms.ChoiceField(choices=SiteLink.Source.choices, initial=SiteLink.Source.ENTERED)


def _can_write(request: HttpRequest) -> bool:
    principal = principal_for(request)
    if principal.role not in READERS:
        raise Http404  # the operator's network: the page does not exist for tenants
    return principal.role == Role.OPERATOR and principal.can_write


def _save_link(actor: Actor, request: HttpRequest, data: dict[str, Any]) -> str:
    a, b = data.pop("a"), data.pop("b")
    low, high = (a, b) if a.pk < b.pk else (b, a)
    existing = SiteLink.objects.filter(a=low, b=high).first()
    principal = principal_for(request)
    if existing is not None:
        site_admin.update_link(actor, principal, existing, **data)
        return f"Link {low.name} – {high.name} changed."
    site_admin.create_link(actor, principal, a=a, b=b, **data)
    return f"Link {low.name} – {high.name} added."


@login_required
def sites(request: HttpRequest) -> HttpResponse:
    """Sites with their fabrics, nodes and GPUs; links between them; operators' forms."""
    can_write = _can_write(request)
    editing = (
        Site.objects.filter(pk=request.GET.get("edit") or 0).first() if request.GET.get("edit", "").isdigit() else None
    )
    site_form = SiteForm(prefix="site", instance=editing)
    link_form = LinkForm(prefix="link")
    if request.method == "POST":
        principal = refuse_readers(request)
        actor = Actor.for_user(request.user)
        which = request.POST.get("form")
        try:
            if which == "site":
                target = Site.objects.filter(pk=request.POST.get("site_id") or 0).first()
                site_form = SiteForm(request.POST, prefix="site", instance=target)
                if site_form.is_valid():
                    values = {k: site_form.cleaned_data[k] for k in SiteForm.Meta.fields}
                    if target is None:
                        site = site_admin.create_site(actor, principal, **values)
                        messages.success(request, f"Site {site.name} added (its workers consume {site.queue}).")
                    else:
                        site = site_admin.update_site(actor, principal, target, **values)
                        messages.success(request, f"Site {site.name} saved.")
                    return redirect("web:sites")
            elif which == "link":
                link_form = LinkForm(request.POST, prefix="link")
                if link_form.is_valid():
                    messages.success(request, _save_link(actor, request, dict(link_form.cleaned_data)))
                    return redirect("web:sites")
        except ConsoleError as exc:
            (site_form if which == "site" else link_form).add_error(None, exc.detail)
    links = list(SiteLink.objects.select_related("a", "b").order_by("a__name", "b__name"))
    context = {
        "groups": site_admin.site_figures(),
        "links": links,
        "site_form": site_form if can_write else None,
        "link_form": link_form if can_write else None,
        "editing": editing,
        "can_write": can_write,
        "active": "sites",
    }
    return render(request, "web/sites.html", context)


@login_required
@require_POST
def site_delete(request: HttpRequest, pk: int) -> HttpResponse:
    _can_write(request)
    principal = refuse_readers(request)
    site = get_object_or_404(Site, pk=pk)
    try:
        site_admin.delete_site(Actor.for_user(request.user), principal, site)
    except ConsoleError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Site {site.name} deleted.")
    return redirect("web:sites")


@login_required
@require_POST
def site_link_delete(request: HttpRequest, pk: int) -> HttpResponse:
    _can_write(request)
    principal = refuse_readers(request)
    link = get_object_or_404(SiteLink.objects.select_related("a", "b"), pk=pk)
    site_admin.delete_link(Actor.for_user(request.user), principal, link)
    messages.success(request, f"Link {link.a.name} – {link.b.name} removed.")
    return redirect("web:sites")


class DatasetForm(forms.Form):
    name = forms.CharField(max_length=100)
    site = forms.ModelChoiceField(queryset=Site.objects.order_by("name"), empty_label=None)
    size_tb = forms.FloatField(min_value=0, initial=0, label="Size (TB)")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.order_by("name"), label="Tenant")

    def __init__(self, *args: Any, operator: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not operator:
            del self.fields["tenant"]  # a tenant registers for itself
        else:
            self.order_fields(["tenant"])  # whose it is, first


@login_required
def dataset_list(request: HttpRequest) -> HttpResponse:
    """Datasets at sites: requests ``near: "dataset:<name>"`` are placed at (or nearest to) the
    dataset's site."""
    principal = principal_for(request)
    if principal.role is None:
        raise Http404
    form = DatasetForm(operator=principal.is_operator)
    if request.method == "POST":
        principal = refuse_readers(request)
        form = DatasetForm(request.POST, operator=principal.is_operator)
        if form.is_valid():
            data = dict(form.cleaned_data)
            tenant = data.pop("tenant", None) or get_object_or_404(Tenant, pk=principal.tenant_id or 0)
            try:
                dataset = datasets.register_dataset(Actor.for_user(request.user), principal, tenant=tenant, **data)
            except ConsoleError as exc:
                form.add_error(None, exc.detail)
            else:
                messages.success(request, f"Dataset {dataset.name} registered at {dataset.site.name}.")
                return redirect("web:datasets")
    rows = Dataset.objects.visible_to(principal).select_related("site", "tenant").order_by("tenant__name", "name")
    context = {
        "rows": rows,
        "form": form if principal.can_write else None,
        "no_sites": not Site.objects.exists(),
        "active": "datasets",
    }
    return render(request, "web/datasets.html", context)


@login_required
@require_POST
def dataset_delete(request: HttpRequest, pk: int) -> HttpResponse:
    principal = refuse_readers(request)
    dataset = Dataset.objects.visible_to(principal).filter(pk=pk).first()
    if dataset is None:
        raise Http404  # another tenant's dataset does not exist for you
    datasets.delete_dataset(Actor.for_user(request.user), principal, dataset)
    messages.success(request, f"Dataset {dataset.name} deleted.")
    return redirect("web:datasets")
