"""The Notifications page: everyone's own e-mail preferences; for tenant admins their tenant's
webhooks (register, send a test event, delete) and the recent delivery log. Operators and
auditors read every tenant's webhooks and deliveries; operators may test and delete."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from console.notify import services
from console.notify.api.serializers import EVENT_CHOICES
from console.notify.models import Delivery, Preference, Webhook
from console.tenancy import audit
from console.tenancy.context import Actor
from console.tenancy.errors import ConsoleError
from console.tenancy.models import Role, Tenant
from console.web.context import AuthenticatedHttpRequest, principal_for, refuse_readers

READERS = (Role.OPERATOR, Role.AUDITOR, Role.TENANT_ADMIN)


#: The page names the events in words; the API and the payloads keep the codes.
EVENT_WORDS = {
    "reservation.ready": "ready (partition verified on the fabric)",
    "reservation.expiring": "ending soon",
    "reservation.preempted": "preempted",
    "reservation.failed": "failed on the fabric",
    "reservation.placed": "placed from the queue",
    "reservation.fabric_fault": "a link or node failure touches it",
}


class WebhookForm(forms.Form):
    name = forms.CharField(max_length=100)
    url = forms.URLField(max_length=500, label="URL", assume_scheme="https")
    events = forms.MultipleChoiceField(
        choices=[(e, EVENT_WORDS.get(e, e)) for e in EVENT_CHOICES],
        initial=EVENT_CHOICES,
        widget=forms.CheckboxSelectMultiple,
    )
    secret = forms.CharField(
        required=False, min_length=16, max_length=200, help_text="Leave empty to have one generated (shown once)."
    )


class PreferenceForm(forms.ModelForm):
    class Meta:
        model = Preference
        fields = ["email_own", "email_tenant"]
        labels = {
            "email_own": "E-mail me about reservations I created",
            "email_tenant": "E-mail me about every reservation of my tenant",
        }


@login_required
def notifications(request: AuthenticatedHttpRequest) -> HttpResponse:
    principal = principal_for(request)
    if principal.role is None:
        raise Http404
    pref = Preference.objects.filter(user=request.user).first() or Preference(user=request.user)
    pref_form, hook_form, created = PreferenceForm(instance=pref), WebhookForm(), None
    if request.method == "POST":
        refuse_readers(request)
        actor = Actor.for_user(request.user)
        if request.POST.get("form") == "preferences":
            pref_form = PreferenceForm(request.POST, instance=pref)
            if pref_form.is_valid():
                with transaction.atomic():
                    before = audit.snapshot(pref) if pref.pk else None
                    pref = pref_form.save()
                    audit.record(actor, "notify.preference.update", pref, before=before, after=audit.snapshot(pref))
                messages.success(request, "E-mail preferences saved.")
                return redirect("web:notifications")
        elif principal.role == Role.TENANT_ADMIN:
            hook_form = WebhookForm(request.POST)
            if hook_form.is_valid():
                try:
                    webhook, secret = services.create_webhook(
                        actor,
                        principal,
                        tenant=Tenant.objects.get(pk=principal.own_tenant_id()),
                        **hook_form.cleaned_data,
                    )
                except ConsoleError as exc:
                    hook_form.add_error(None, exc.detail)
                else:
                    created, hook_form = {"webhook": webhook, "secret": secret}, WebhookForm()
    context = {
        "active": "notifications",
        "pref_form": pref_form,
        "hook_form": hook_form if principal.role == Role.TENANT_ADMIN else None,
        "created": created,
        "can_manage": principal.can_write and principal.role in (Role.OPERATOR, Role.TENANT_ADMIN),
    }
    if principal.role in READERS:
        context["webhooks"] = Webhook.objects.visible_to(principal).select_related("tenant")
        context["deliveries"] = (
            Delivery.objects.visible_to(principal)
            .select_related("webhook", "event")
            .prefetch_related("attempt_log")[:25]
        )
    return render(request, "web/notifications.html", context)


def _webhook(request: HttpRequest, pk: int) -> Webhook:
    principal = refuse_readers(request)
    webhook = Webhook.objects.visible_to(principal).filter(pk=pk).first()
    if webhook is None:
        raise Http404
    return webhook


@login_required
@require_POST
def webhook_test(request: HttpRequest, pk: int) -> HttpResponse:
    webhook = _webhook(request, pk)
    services.send_test(Actor.for_user(request.user), principal_for(request), webhook)
    messages.success(request, f"Test event queued for {webhook.name}; its delivery appears below.")
    return redirect("web:notifications")


@login_required
@require_POST
def webhook_delete(request: HttpRequest, pk: int) -> HttpResponse:
    webhook = _webhook(request, pk)
    services.delete_webhook(Actor.for_user(request.user), principal_for(request), webhook)
    messages.success(request, f"Webhook {webhook.name} deleted.")
    return redirect("web:notifications")
