"""A real webhook receiver for tests: a stdlib HTTP server on a free port in a thread. It answers
with the status codes it is told to (then 200) and keeps every request it got."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]  # lower-case names (HTTP header names are case-insensitive)
    body: bytes


@dataclass
class Receiver:
    answers: list[int] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    _arrived: threading.Condition = field(default_factory=threading.Condition)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hook"

    def start(self, host: str = "127.0.0.1", port: int = 0) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._arrived:
                    code = receiver.answers.pop(0) if receiver.answers else 200
                    receiver.received.append(Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                    receiver._arrived.notify_all()
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        """Block until ``count`` requests arrived (or fail after ``timeout`` seconds)."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: len(self.received) >= count, timeout=timeout):
                raise AssertionError(f"{len(self.received)} of {count} webhook requests arrived in {timeout} s")
            return list(self.received)

    def wait_until(self, wanted: Callable[[Received], bool], timeout: float = 30.0) -> Received:
        """Block until a request ``wanted`` accepts arrived (or fail after ``timeout`` seconds)."""

        def found() -> Received | None:
            return next((r for r in self.received if wanted(r)), None)

        with self._arrived:
            if not self._arrived.wait_for(lambda: found() is not None, timeout=timeout):
                raise AssertionError(f"none of the {len(self.received)} webhook requests wanted arrived in {timeout} s")
            got = found()
            assert got is not None
            return got

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
