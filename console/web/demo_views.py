"""Demo only: the demo's built-in webhook receiver (console/notify/demo_sink.py).

``POST /demo/webhook-sink/`` is where the demo webhook delivers (no session, no CSRF token: a
webhook receiver is authenticated by the signature it verifies); ``GET`` shows operators and
auditors what it received and whether each signature verified. Off (POST answers 404) unless
``manage.py up`` registered the demo webhook on a seeded demo.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt

from console.notify import demo_sink
from console.notify.models import DemoSinkReceipt
from console.tenancy.models import Role
from console.web.context import principal_for

SHOWN = 50


@csrf_exempt
def webhook_sink(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        receipt = demo_sink.receive(request.headers, request.body)
        if receipt is None:
            raise Http404
        if isinstance(receipt, str):  # not verified: refused, not recorded
            return HttpResponse(receipt, status=401, content_type="text/plain")
        return HttpResponse(status=204)
    return _receipts(request)


@login_required
def _receipts(request: HttpRequest) -> HttpResponse:
    if principal_for(request).role not in (Role.OPERATOR, Role.AUDITOR):
        raise Http404
    webhook = demo_sink.sink_webhook()
    return render(
        request,
        "web/demo_webhook_sink.html",
        {
            "webhook": webhook,
            "receipts": [
                (r, json.dumps(r.payload, indent=2, sort_keys=True) if r.payload else "")
                for r in DemoSinkReceipt.objects.all()[:SHOWN]
            ],
            "tenant": demo_sink.DEMO_SINK_TENANT,
            "max_skew": demo_sink.MAX_SKEW_S,
        },
    )
