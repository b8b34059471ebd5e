"""Fixtures of the notification tests: the 16-node fat tree and its pool, a real webhook receiver,
and a real Celery worker (solo pool, this run's Redis) for deliveries and e-mail."""

from __future__ import annotations

import pytest

from console.notify import services
from console.notify.models import all_event_types
from console.tenancy.context import Actor
from console.tenancy.models import Principal, Role
from tests.notify.receiver import Receiver
from tests.scheduling.conftest import make_fabric, make_pool


@pytest.fixture(autouse=True)
def _local_receivers(settings):
    settings.NOTIFY_ALLOW_PRIVATE_URLS = True  # the receivers are on 127.0.0.1
    settings.NOTIFY_WEBHOOK_BACKOFF_S = 1
    settings.NOTIFY_WEBHOOK_TIMEOUT_S = 5


@pytest.fixture
def pool(db):
    return make_pool(make_fabric("ft16", {"topology": "fat-tree", "nodes": 16, "node_type": "DGX-H100"}))


@pytest.fixture
def receiver():
    r = Receiver().start()
    yield r
    r.stop()


def add_webhook(tenant, url: str, events=None, secret: str = "s3cret-s3cret-s3cret"):
    """A webhook of ``tenant`` registered through the service, as its admin would."""
    webhook, _ = services.create_webhook(
        Actor.system("tests"),
        Principal(None, Role.TENANT_ADMIN, tenant.pk),
        tenant=tenant,
        name="receiver",
        url=url,
        events=events or all_event_types(),
        secret=secret,
    )
    return webhook
