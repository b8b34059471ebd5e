"""``UfmContractFake``: a CONTRACT FAKE of the UFM Enterprise REST endpoints the ufm driver uses.

Not UFM. It implements, with UFM's documented validation and status codes, exactly the endpoints
listed in :mod:`console.fabric.drivers.ufm` (PKey GUIDs REST API under ``/ufmRest/resources/``,
ports, version, port actions) over a small threaded HTTP server with basic authentication, so the
driver is tested against the documented contract rather than a mock of itself. Documented rules
enforced here: P_Key a hex string in (0x0, 0x7fff) exclusive; GUIDs hex strings of 16-20
characters; ``membership`` and ``memberships`` conflict; ``memberships`` as long as ``guids``.

SHARP (UFM Enterprise REST API guide 6.16-6.24, "NVIDIA SHARP REST API"): the two documented reads,
``GET /ufmRest/app/sharp/allocate_resources`` (every SHARP reservation, ``{app_id: {"pkey": "0x12",
"guids": ["0x…", …]}}``) and ``GET …/allocate_resources/<app_id>`` (one; 404 when unknown). Behind
them the fake emulates SHARP AM's ``reservation_auto_by_pkeys`` (the default): one reservation per
P_Key that has GUIDs, holding exactly that P_Key's member GUIDs (``0x``-prefixed), so it follows
every PKey call at once. ``app_id`` is the fake's own naming (``pkey_0x12``): the documentation does
not fix it, so clients must match by ``pkey``. ``sharp_enabled = False`` stands for UFM with SHARP
off (no reservations: the list is empty, one is 404). The create/update/delete calls are being
withdrawn (April 2026) and are deliberately not emulated.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

_GUID = re.compile(r"^[0-9a-fA-F]{16,20}$")
_PKEY = re.compile(r"^0x[0-9a-fA-F]{1,4}$")


class ContractError(Exception):
    """A request the documented contract refuses (answered 400/404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _pkey(text: Any) -> int:
    if not isinstance(text, str) or not _PKEY.match(text):
        raise ContractError(400, f"pkey must be a hex string, got {text!r}")
    value = int(text, 16)
    if not 0 < value < 0x7FFF:
        raise ContractError(400, f"pkey {text} outside (0x0, 0x7fff)")
    return value


def _guids(values: Any) -> list[str]:
    if not isinstance(values, list) or not values:
        raise ContractError(400, "guids must be a non-empty list")
    for g in values:
        if not isinstance(g, str) or not _GUID.match(g):
            raise ContractError(400, f"bad GUID {g!r}: hex string of 16-20 characters")
    return [g.lower() for g in values]


class UfmContractFake:
    """Start with ``with UfmContractFake(ports=[...]) as ufm: ufm.url``; state in ``ufm.pkeys``."""

    version = {"ufm_release_version": "6.18.0-5 (contract fake)", "opensm": "5.20.0"}

    def __init__(self, *, ports: list[dict[str, Any]], username: str = "admin", password: str = "secret") -> None:
        self.ports = ports
        self.pkeys: dict[int, dict[str, Any]] = {}
        self.sharp_enabled = True
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._auth = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> UfmContractFake:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the contract --------------------------------------------------------------------------

    def _show(self, pkey: int) -> dict[str, Any]:
        p = self.pkeys[pkey]
        return {
            "partition": p["partition"],
            "ip_over_ib": p["ip_over_ib"],
            "guids": [{"guid": g, "membership": m, "index0": False} for g, m in sorted(p["guids"].items())],
            "qos_conf": dict(p["qos_conf"]),
        }

    def sharp_reservations(self) -> dict[str, dict[str, Any]]:
        """SHARP AM's reservations under ``reservation_auto_by_pkeys``: one per P_Key with GUIDs."""
        if not self.sharp_enabled:
            return {}
        return {
            f"pkey_{k:#x}": {"pkey": f"{k:#x}", "guids": [f"0x{g}" for g in sorted(p["guids"])]}
            for k, p in sorted(self.pkeys.items())
            if p["guids"]
        }

    def handle(self, method: str, path: str, query: dict, body: Any) -> tuple[int, Any]:
        """Route one request; returns (status, JSON body)."""
        self.requests.append((method, path))
        if method == "GET" and path == "/ufmRest/app/ufm_version":
            return 200, self.version
        if method == "GET" and path == "/ufmRest/resources/ports":
            return 200, self.ports
        if method == "POST" and path == "/ufmRest/actions":
            return self._port_action(body)
        if method == "GET" and path == "/ufmRest/app/sharp/allocate_resources":
            return 200, self.sharp_reservations()
        if method == "GET" and (m := re.fullmatch(r"/ufmRest/app/sharp/allocate_resources/([^/]+)", path)):
            if (found := self.sharp_reservations().get(m[1])) is None:
                raise ContractError(404, f"no SHARP reservation {m[1]!r}")
            return 200, found
        if path == "/ufmRest/resources/pkeys" and method == "GET":
            return 200, {f"{k:#x}": self._show(k) for k in sorted(self.pkeys)}
        if path == "/ufmRest/resources/pkeys/add" and method == "POST":
            pkey = _pkey(body.get("pkey"))
            if pkey in self.pkeys:
                raise ContractError(400, f"pkey {pkey:#x} exists")
            self.pkeys[pkey] = {
                "partition": body.get("partition_name", ""),
                "guids": {},
                "ip_over_ib": bool(body.get("ip_over_ib", True)),
                "qos_conf": {"service_level": int(body.get("service_level", 0)), "mtu_limit": 2, "rate_limit": 2.5},
            }
            return 200, {}
        if path == "/ufmRest/resources/pkeys" and method in ("POST", "PUT"):
            return self._guids(method, body)
        if path == "/ufmRest/resources/pkeys/qos_conf" and method == "PUT":
            pkey = _pkey(body.get("pkey"))
            if pkey not in self.pkeys:
                raise ContractError(404, f"pkey {pkey:#x} not found")
            sl = body.get("service_level", 0)
            if not isinstance(sl, int) or not 0 <= sl <= 15:
                raise ContractError(400, "service_level 0-15")
            self.pkeys[pkey]["qos_conf"]["service_level"] = sl
            return 200, {}
        if m := re.fullmatch(r"/ufmRest/resources/pkeys/(0x[0-9a-fA-F]+)/guids/([0-9a-fA-F,]+)", path):
            pkey = _pkey(m[1])
            if method != "DELETE" or pkey not in self.pkeys:
                raise ContractError(404, "not found")
            for g in _guids(m[2].split(",")):
                self.pkeys[pkey]["guids"].pop(g, None)
            return 200, {}
        if m := re.fullmatch(r"/ufmRest/resources/pkeys/(0x[0-9a-fA-F]+)", path):
            pkey = _pkey(m[1])
            if pkey not in self.pkeys:
                raise ContractError(404, f"pkey {pkey:#x} not found")
            if method == "GET":
                return 200, self._show(pkey)
            if method == "DELETE":
                del self.pkeys[pkey]
                return 200, {}
        raise ContractError(404, f"no such endpoint {method} {path}")

    def _guids(self, method: str, body: dict[str, Any]) -> tuple[int, Any]:
        pkey = _pkey(body.get("pkey"))
        guids = _guids(body.get("guids"))
        if "membership" in body and "memberships" in body:
            raise ContractError(400, "membership and memberships conflict")
        memberships = body.get("memberships") or [body.get("membership", "full")] * len(guids)
        if len(memberships) != len(guids) or set(memberships) - {"full", "limited"}:
            raise ContractError(400, "memberships: one of full/limited per GUID")
        entry = self.pkeys.setdefault(
            pkey,
            {
                "partition": "",
                "guids": {},
                "ip_over_ib": True,
                "qos_conf": {"service_level": 0, "mtu_limit": 2, "rate_limit": 2.5},
            },
        )
        if method == "PUT":
            entry["guids"] = {}
        entry["guids"].update(zip(guids, memberships, strict=True))
        entry["ip_over_ib"] = bool(body.get("ip_over_ib", True))
        return 200, {}

    def _port_action(self, body: dict[str, Any]) -> tuple[int, Any]:
        action = body.get("action")
        if action not in ("enable", "disable") or body.get("object_type") != "System":
            raise ContractError(400, "action must be enable/disable on a System")
        port_id = (body.get("params") or {}).get("port_id")
        for port in self.ports:
            if port["name"] == port_id and port["systemID"] in body.get("object_ids", []):
                port["physical_state"] = "Disabled" if action == "disable" else "LinkUp"
                return 202, {}
        raise ContractError(404, f"no port {port_id!r}")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self, method: str) -> None:
                if self.headers.get("Authorization") != fake._auth:
                    return self._send(401, {"error": "unauthorized"})
                url = urlparse(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"null") if length else {}
                    with fake.lock:
                        status, payload = fake.handle(method, url.path, parse_qs(url.query), body or {})
                except ContractError as exc:
                    status, payload = exc.status, {"error": str(exc)}
                except (ValueError, AttributeError) as exc:
                    status, payload = 400, {"error": f"malformed request: {exc}"}
                self._send(status, payload)

            def _send(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

            def log_message(self, *args: Any) -> None:
                pass

        return Handler
