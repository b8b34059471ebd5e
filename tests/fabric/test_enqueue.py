"""The fabric's tasks published by name: the same message ``apply_async`` sends, only after commit.

The change services publish ``fabric.apply_change`` by name so they need not import the tasks that
call them; a worker must not be able to tell the difference (task name, kwargs, time limits,
ignore_result, routing), and nothing is published while the transaction is still open.
"""

from __future__ import annotations

import pytest
from django.test import TestCase

from console.celery import app as celery_app
from console.fabric import enqueue
from console.fabric.tasks import apply_change_task

pytestmark = pytest.mark.django_db
VARIES = {"id", "root_id"}  # a fresh task id per publish


@pytest.fixture
def published(monkeypatch):
    """Every task message built for the broker, captured instead of sent."""
    sent: list[dict] = []

    def capture(producer, name, message, **options):
        headers = {k: v for k, v in message.headers.items() if k not in VARIES}
        sent.append({"name": name, "headers": headers, "body": message.body, "options": options})

    monkeypatch.setattr(celery_app.amqp, "send_task_message", capture)
    return sent


def test_apply_change_by_name_is_the_message_apply_async_sends_after_commit(published):
    # given the message the task object itself would publish
    apply_change_task.apply_async(kwargs={"change_id": 7})
    (expected,) = published
    assert expected["headers"]["timelimit"] == [enqueue.TIME_LIMIT, enqueue.TIME_LIMIT - 30]
    # when a service enqueues the same change by name inside a transaction
    with TestCase.captureOnCommitCallbacks(execute=True) as callbacks:
        enqueue.enqueue_apply(7)
        # then nothing is published before the commit
        assert len(published) == 1
    # and after it, exactly the same message
    assert len(callbacks) == 1
    assert published[1] == expected


def test_reconcile_is_published_by_name_after_commit(published):
    with TestCase.captureOnCommitCallbacks(execute=True):
        enqueue.enqueue_reconcile(3)
        assert published == []
    (message,) = published
    assert message["headers"]["task"] == "fabric.reconcile" and message["body"][1] == {"fabric_id": 3}


def test_tasks_published_from_any_thread_go_through_the_console_app():
    # the fabric layer publishes through celery.current_app: in a thread that never touched the
    # app (a web server's worker thread), it must still be the configured console app, not
    # Celery's unconfigured fallback with its default broker
    import threading

    from celery import current_app

    seen = []
    thread = threading.Thread(target=lambda: seen.append(current_app._get_current_object()))
    thread.start()
    thread.join()
    assert seen == [celery_app]
