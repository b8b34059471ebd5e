"""What a webhook receiver written from the documentation checks: the event schemas as docs/api.md
prints them (its "Notifications" section), and the signature as it describes it."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from pathlib import Path
from typing import Any

API_MD = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def documented_schemas() -> dict[str, dict[str, Any]]:
    """Every event's JSON Schema in docs/api.md, by its title (the event type)."""
    text = API_MD.read_text()
    section = text[text.index("## Notifications") :]
    documented = {}
    for block in re.findall(r"```json\n(.*?)\n```", section, flags=re.S):
        schema = json.loads(block)
        if "title" in schema:
            documented[schema["title"]] = schema
    return documented


def signature_ok(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """HMAC-SHA256 over ``<X-IBConsole-Timestamp>.<raw body>``, compared in constant time with
    ``X-IBConsole-Signature`` (``sha256=<hex>``); ``headers`` with lower-case names."""
    timestamp = headers["x-ibconsole-timestamp"]
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["x-ibconsole-signature"], f"sha256={expected}")
