"""Publishing from plain threads (the collector, Celery tasks) goes through one long-lived event
loop per process, so channels-redis keeps its connection instead of opening one per publish."""

from __future__ import annotations

import threading

import pytest
import redis
from channels.layers import get_channel_layer
from channels_redis.core import RedisChannelLayer
from django import db
from django.conf import settings

from console import broadcast


@pytest.mark.django_db(transaction=True)  # no test transaction: a publish goes at once
def test_publishes_from_a_plain_thread_reuse_one_loop_and_one_connection():
    assert isinstance(get_channel_layer(), RedisChannelLayer)  # the full suite runs on Redis
    stats = redis.Redis.from_url(settings.REDIS_URL)

    def connections() -> int:
        return int(stats.info("stats")["total_connections_received"])

    def publish_in_a_thread(n: int) -> None:
        errors: list[BaseException] = []

        def run() -> None:
            try:
                for i in range(n):
                    broadcast.publish_many([("tenant.424242", {"type": "link.delta", "n": i})])
            except BaseException as exc:  # surfaced below
                errors.append(exc)
            finally:
                db.connections.close_all()

        worker = threading.Thread(target=run)
        worker.start()
        worker.join(30)
        assert not errors, errors

    publish_in_a_thread(1)  # the process's send loop and its connection exist from here on
    loop = broadcast._send_loop()
    before = connections()
    publish_in_a_thread(5)
    publish_in_a_thread(5)
    assert broadcast._send_loop() is loop
    # (the sequence numbers' synchronous client is long-lived too)
    assert connections() - before == 0


@pytest.mark.django_db
def test_a_publish_inside_a_transaction_waits_for_the_commit(django_capture_on_commit_callbacks, monkeypatch):
    sent: list = []
    monkeypatch.setattr(broadcast, "_group_send", sent.extend)
    with django_capture_on_commit_callbacks(execute=True):
        broadcast.publish("tenant.424243", {"type": "link.delta"})
        assert sent == []
    assert [g for g, _ in sent] == ["tenant.424243"] and sent[0][1]["type"] == "live.message"
