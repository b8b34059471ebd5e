"""Real transactions racing: each callable in its own thread (so its own database connection),
released together by a barrier."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection


def race(**steps: Callable[[], object]) -> dict[str, object]:
    """Run ``steps`` at the same instant; returns each one's result, or the exception it raised."""
    barrier = threading.Barrier(len(steps))
    results: dict[str, object] = {}

    def run(name: str, step: Callable[[], object]) -> None:
        try:
            barrier.wait(timeout=30)
            results[name] = step()
        except Exception as exc:
            results[name] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=item) for item in steps.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results
