"""Priority classes are an entitlement of the quota (issue 33, item 4): any tenant could book
``inference`` (the high-priority VL table, the last to be preempted, priced below training). A
quota allows the classes an operator set (a new one: training and best-effort) and, optionally,
a share of GPUs held at once in inference; the service refuses anything else naming what the
quota allows, whichever way the request comes (the API, the page's form, the CLI, the queue)."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from console.tenancy.errors import Invalid
from scheduling.models import Quota, Reservation
from scheduling.services import quotas, reservations
from scheduling.services.queue import reserve_asap
from tests.scheduling.conftest import OPERATOR, SYSTEM, give_quota, request_for, tenant_principal

pytestmark = pytest.mark.django_db
S = Reservation.Status


def test_a_new_quota_allows_training_and_best_effort_and_refuses_inference_naming_them(pool, tenant_a):
    quota = quotas.set_quota(SYSTEM, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64)
    assert quota.classes == ["training", "best-effort"] and quota.high_priority_gpus is None
    principal = tenant_principal(tenant_a)
    refused = reservations.reserve(SYSTEM, principal, request_for(pool, gpus=8, priority_class="inference"))
    assert refused.status == S.REJECTED and refused.explanation["reason"] == "class_not_allowed"
    assert "it allows training, best-effort" in refused.reason
    ok = reservations.reserve(SYSTEM, principal, request_for(pool, gpus=8, priority_class="best-effort"))
    assert ok.status == S.PROVISIONING


def test_the_queue_does_not_wait_for_a_class_the_quota_never_allows(pool, tenant_a):
    give_quota(tenant_a, pool, 64, classes=("training",))
    refused = reserve_asap(SYSTEM, tenant_principal(tenant_a), request_for(pool, gpus=8, priority_class="inference"))
    assert refused.status == S.REJECTED and "it allows training" in refused.reason


def test_inference_beyond_the_quotas_share_is_refused(pool, tenant_a):
    give_quota(tenant_a, pool, 64)
    quotas.set_quota(SYSTEM, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=64, high_priority_gpus=16)
    principal = tenant_principal(tenant_a)
    first = reservations.reserve(SYSTEM, principal, request_for(pool, gpus=16, priority_class="inference"))
    assert first.status == S.PROVISIONING
    over = reservations.reserve(SYSTEM, principal, request_for(pool, gpus=8, priority_class="inference"))
    assert over.status == S.REJECTED and over.explanation["reason"] == "over_high_priority_share"
    assert "holds up to 16 of its 16" in over.reason
    training = reservations.reserve(SYSTEM, principal, request_for(pool, gpus=8, priority_class="training"))
    assert training.status == S.PROVISIONING  # the share bounds inference only


def test_the_api_sets_the_classes_and_refuses_a_tenants_inference_with_409(
    pool, tenant_a, admin_a, client_for, operator
):
    op = client_for(operator)
    made = op.post(
        "/api/quotas/", {"tenant": tenant_a.pk, "pool": pool.pk, "guaranteed_gpus": 64}, format="json"
    ).json()
    assert made["classes"] == ["training", "best-effort"] and made["high_priority_gpus"] is None
    bad = op.patch(f"/api/quotas/{made['id']}/", {"classes": ["premium"]}, format="json")
    assert bad.status_code == 400
    tenant = client_for(admin_a)
    body = {"pool": pool.pk, "gpus": 8, "duration_minutes": 60, "priority_class": "inference"}
    refused = tenant.post("/api/reservations/", body, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "class_not_allowed"
    assert "training, best-effort" in refused.json()["detail"]
    granted = op.patch(
        f"/api/quotas/{made['id']}/", {"classes": ["inference", "training"], "high_priority_gpus": 8}, format="json"
    )
    assert granted.status_code == 200 and granted.json()["classes"] == ["training", "inference"]
    assert tenant.post("/api/reservations/", body, format="json").status_code == 201
    # a tenant cannot grant itself a class
    assert tenant.patch(f"/api/quotas/{made['id']}/", {"classes": ["inference"]}, format="json").status_code == 403


def test_the_cli_and_the_service_check_the_classes(pool, tenant_a):
    out = io.StringIO()
    call_command(
        "schedule", "quota", "--tenant", tenant_a.slug, "--pool", str(pool.pk), "--guaranteed", "32",
        "--classes", "inference,training", "--high-priority-gpus", "8", stdout=out,
    )  # fmt: skip
    shown = json.loads(out.getvalue())
    assert shown["classes"] == ["training", "inference"] and shown["high_priority_gpus"] == 8
    with pytest.raises(Invalid, match="classes are some of"):
        quotas.set_quota(SYSTEM, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=32, classes=["gold"])
    with pytest.raises(Invalid, match="at most the quota's limit"):
        quotas.set_quota(SYSTEM, OPERATOR, tenant=tenant_a, pool=pool, guaranteed_gpus=32, high_priority_gpus=40)
    assert Quota.objects.get(tenant=tenant_a, pool=pool).classes == ["training", "inference"]
