"""A paused fabric (after a restore; console.fabric.paused): nothing is pushed, by the reconciler,
an operator or a worker holding a queued change, until an operator resumes it; its page says so.
The wire side (review against the SM host's file, resume pushing it) is tested on a real lab in
tests/fabric/test_backup_restore.py."""

from __future__ import annotations

import pytest

from console.fabric import changes, paused
from console.fabric.changes.pipeline import apply_change
from console.fabric.models import ChangeRequest
from console.tenancy.context import Actor
from console.tenancy.errors import Conflict, Forbidden
from console.tenancy.models import AuditEntry, Principal, Role

pytestmark = pytest.mark.django_db
ACTOR = Actor.system("test")
OPERATOR = Principal(None, Role.OPERATOR, None)


def test_a_paused_fabric_pushes_nothing_until_an_operator_resumes_it(prod_fabric, tenant_a, client, operator, settings):
    fabric = prod_fabric
    settings.FABRIC_COMPARE_WAIT_S = 0  # no worker runs the page's discovery here: do not wait for one
    queued = changes.request_change(ACTOR, OPERATOR, fabric, reason="before the restore")
    assert queued.status == ChangeRequest.Status.QUEUED
    assert paused.pause_all(ACTOR, "restored from the backup of 2026-12-01T00:00:00+00:00") == ["prod-ib"]
    assert AuditEntry.objects.filter(action="fabric.paused", object_id=str(fabric.pk)).count() == 1

    assert changes.reconcile(fabric, actor=ACTOR) is None  # the reconciler creates nothing
    with pytest.raises(Conflict, match="paused since a restore"):
        changes.request_change(ACTOR, OPERATOR, fabric, reason="an operator's push")
    assert changes.request_change(ACTOR, OPERATOR, fabric, dry_run=True).status == "previewed"  # a preview is fine
    assert apply_change(queued.pk, worker_id="w") is None  # a worker leaves the queued change alone
    queued.refresh_from_db()
    assert queued.status == ChangeRequest.Status.QUEUED and queued.lease_owner in ("", None)

    client.force_login(operator)
    page = client.get(f"/fabrics/{fabric.pk}/").content.decode()
    assert 'data-testid="fabric-paused"' in page and "manage.py fabric resume --fabric prod-ib --confirm" in page

    with pytest.raises(Forbidden):
        paused.resume(ACTOR, Principal(None, Role.TENANT_ADMIN, tenant_a.pk), fabric, confirm=True)
    with pytest.raises(Conflict, match="the wire could not be read"):  # no agent: says it cannot tell
        paused.resume(ACTOR, OPERATOR, fabric, confirm=False)
    fabric.refresh_from_db()
    assert fabric.paused_at is not None
    done = paused.resume(ACTOR, OPERATOR, fabric, confirm=True)
    assert done["held_changes"] == [queued.pk] and done["change"] > queued.pk
    fabric.refresh_from_db()
    assert fabric.paused_at is None and fabric.paused_reason == ""
    assert AuditEntry.objects.filter(action="fabric.resumed", object_id=str(fabric.pk)).count() == 1
    assert 'data-testid="fabric-paused"' not in client.get(f"/fabrics/{fabric.pk}/").content.decode()
    with pytest.raises(Conflict, match="not paused"):
        paused.resume(ACTOR, OPERATOR, fabric, confirm=True)
