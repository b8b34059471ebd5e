"""The audit log in words: every action code the code base emits has a wording of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from console.tenancy.audit_words import WORDINGS, fields, sentence

ROOT = Path(__file__).resolve().parents[2]


def _emitted() -> tuple[set[str], set[str]]:
    """Literal codes passed to ``audit.record`` (or as an ``action=`` of a dotted code), and the
    f-string codes as regular expressions (``fabric.change.step.{row.status}`` -> ``fabric\\.change\\.step\\..+``)."""
    literal, patterns = set(), set()
    for package in ("console", "scheduling", "designer"):
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                code = None
                if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "record" and len(node.args) > 1:
                    if getattr(node.func, "value", None) is not None and getattr(node.func.value, "id", "") == "audit":
                        code = node.args[1]
                elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("_wind_down", "_fault"):
                    code = node.args[3] if getattr(node.func, "id", "") == "_wind_down" else node.args[2]
                if isinstance(code, ast.Constant) and isinstance(code.value, str):
                    literal.add(code.value)
                elif isinstance(code, ast.JoinedStr):
                    parts = [re.escape(p.value) if isinstance(p, ast.Constant) else ".+" for p in code.values]
                    patterns.add("".join(parts))
    return literal, patterns


def test_every_literal_code_emitted_has_a_wording():
    literal, patterns = _emitted()
    assert len(literal) > 40 and "reservation.release" in literal and "quota.set" in literal  # the scan works
    assert sorted(code for code in literal if code not in WORDINGS) == []


def test_every_computed_code_family_has_wordings():
    _, patterns = _emitted()
    assert r"fabric\.change\.step\..+" in patterns
    for pattern in patterns:
        if pattern == ".+":
            continue  # a code passed through a variable: its callers are scanned as literals
        assert any(re.fullmatch(pattern, code) for code in WORDINGS), pattern


def test_sentences_read_as_a_person_would_say_them():
    values = fields(
        actor="alice",
        object_repr="train-7",
        object_id="12",
        tenant="Tenant A",
        before={"status": "ready"},
        after={"status": "ending", "gpus": 32, "fabric_id": 3},
        names={"fabric": {3: "lab"}},
    )
    assert sentence("reservation.release", "scheduling.reservation", values) == (
        "alice released reservation train-7 (32 GPUs) on fabric lab"
    )
    step = fields(
        actor="system",
        object_repr="change 12",
        object_id="12",
        tenant=None,
        before=None,
        after={"step": "push partitions"},
        names={},
    )
    assert sentence("fabric.change.step.ok", "fabric.changerequest", step) == (
        "Change request 12 step 'push partitions' succeeded"
    )
    quota = fields(
        actor="op",
        object_repr="quota of 2 in 1",
        object_id="5",
        tenant="Tenant B",
        before=None,
        after={"tenant_id": 2, "pool_id": 1, "guaranteed_gpus": 64, "borrow_limit_gpus": 16},
        names={"pool": {1: "h100"}},
    )
    assert sentence("quota.set", "scheduling.quota", quota) == (
        "op set the quota of Tenant B in pool h100 to 64 GPUs guaranteed + 16 GPUs borrowable"
    )


def test_missing_data_falls_back_to_a_shorter_wording_and_unknown_codes_still_read():
    values = fields(actor="bob", object_repr="r-1", object_id="1", tenant=None, before=None, after={}, names={})
    assert sentence("reservation.release", "scheduling.reservation", values) == "bob released reservation r-1"
    assert sentence("widget.frob", "shop.widget", values) == "bob: widget.frob on shop.widget r-1"
    started = fields(actor="system", object_repr="r-1", object_id="1", tenant=None, before=None, after={}, names={})
    assert sentence("reservation.start", "scheduling.reservation", started) == "Reservation r-1 started"


def test_a_webhook_is_named_once():
    # a webhook's object_repr is str(webhook): "webhook <name>"
    hook = fields(
        actor="demo-webhook",
        object_repr="webhook demo receiver",
        object_id="3",
        tenant=None,
        before=None,
        after={"delivery": 9},
        names={},
    )
    assert sentence("webhook.test", "notify.webhook", hook) == "demo-webhook sent a test event to webhook demo receiver"
    assert sentence("webhook.create", "notify.webhook", hook) == "demo-webhook registered webhook demo receiver"
