"""``make screenshots``: what each demo account sees, page by page, for reviewers.

Starts the console the way ``make run`` does (migrate, ``demo seed``, ``manage.py up`` with the
demo lab) but in embedded mode on its own data directory (var/screenshots/) and a free port, so a
running demo is left alone; signs in as every demo account (and as nobody); opens every page that
account sees (tests/e2e/pages.py, the list the accessibility test walks too) in Debian's Chromium
at 1600×1000; writes docs/screenshots/<account>/<page>.png and docs/screenshots/README.md, which
also counts axe-core's serious and critical findings per page. Not part of ``make test``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "screenshots"
DATA = ROOT / "var" / "screenshots"
VIEWPORT = {"width": 1600, "height": 1000}
OFFERS_NODES = 24  # over a demo tenant admin's quota (192 GPUs, 64 held): refused, with offers
SETTLE_MS = 1500  # live pages draw what their socket brings; give it a moment before the picture

sys.path.insert(0, str(ROOT))
os.environ.pop("DATABASE_URL", None)  # embedded mode: SQLite and in-memory layers, as `make run`
os.environ.pop("REDIS_URL", None)
os.environ.update(CONSOLE_DATA_DIR=str(DATA), CONSOLE_FLAP="0", DJANGO_SETTINGS_MODULE="console.settings")


def manage(*args: str) -> list[str]:
    return [sys.executable, str(ROOT / "manage.py"), *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(base: str, server: subprocess.Popen[bytes], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"manage.py up exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the console did not answer {base}/healthz within {timeout:.0f} s")


def world_ids() -> dict[str, dict[str, object]]:
    """What fills the pages' ``{holes}``, per account: the demo fabric, designs, a change request,
    and a reservation each account may open (a tenant's own)."""
    import django

    django.setup()
    from console.demo import DEMO_ACCOUNTS, DEMO_FABRIC_DESIGN
    from console.fabric.models import ChangeRequest, Fabric
    from designer.models import Design
    from scheduling.models import Node, Pool, Reservation
    from tests.e2e.pages import import_ids

    fabric = Fabric.objects.select_related("revision").get(revision__design__name=DEMO_FABRIC_DESIGN)
    big = Design.objects.get(name="superpod-2048")
    change = ChangeRequest.objects.filter(fabric=fabric).order_by("-pk").first()
    common: dict[str, object] = {
        "fabric": fabric.pk,
        "design": big.pk,
        "revision": big.latest_revision,
        "import_design": fabric.revision.design_id,  # the 1-SU design: an import of it is quick
        "import_revision": fabric.revision.number,
        **import_ids(fabric.revision_id),
        "change": change.pk if change else 0,
        "pool": Pool.objects.filter(fabric=fabric).order_by("name").values_list("pk", flat=True).first() or 0,
        # a node with a BMC (every demo node has one): its power page
        "node": Node.objects.filter(fabric=fabric, bmc__isnull=False)
        .order_by("pk")
        .values_list("pk", flat=True)
        .first()
        or 0,
    }
    out = {}
    for account in [*DEMO_ACCOUNTS, None]:
        slug = account.tenant_slug if account else None
        live = Reservation.objects.order_by("pk")
        reservation = (live.filter(tenant__slug=slug) if slug else live).first()
        name = account.username if account else "anonymous"
        out[name] = {
            **common,
            "reservation": reservation.pk if reservation else 0,
            "q": reservation.name if reservation else "leaf",
        }
    return out


def role_of(username: str) -> str:
    from console.demo import DEMO_ACCOUNTS
    from console.tenancy.models import Role
    from tests.e2e import pages

    roles = {Role.OPERATOR: pages.OPERATOR, Role.AUDITOR: pages.AUDITOR, Role.TENANT_ADMIN: pages.TENANT_ADMIN}
    roles[Role.TENANT_MEMBER] = pages.TENANT_MEMBER
    return next((roles[a.role] for a in DEMO_ACCOUNTS if a.username == username), pages.ANONYMOUS)


def shoot(base: str, ids: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    from playwright.sync_api import sync_playwright

    from console.demo import DEMO_PASSWORD
    from tests.e2e import axe, pages
    from tests.e2e.conftest import CHROMIUM, CHROMIUM_ARGS
    from tests.e2e.pages import open_page, pages_for

    rows: list[dict[str, object]] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_ARGS))
        for account, account_ids in ids.items():
            context = browser.new_context(viewport=VIEWPORT)
            page = context.new_page()
            if account != "anonymous":
                page.goto(f"{base}/login/")
                page.get_by_label("Username").fill(account)
                page.get_by_label("Password").fill(DEMO_PASSWORD)
                page.get_by_role("button", name="Log in").click()
                page.wait_for_url(f"{base}/")
            (OUT / account).mkdir(parents=True, exist_ok=True)
            for entry in pages_for(role_of(account)):
                if "{change}" in entry.path and not account_ids["change"]:
                    print(f"  {account}/{entry.slug}: skipped (the demo has no change request yet)")
                    continue
                status = open_page(page, base, entry, account_ids)
                page.wait_for_timeout(SETTLE_MS)
                shot = OUT / account / f"{entry.slug}.png"
                page.screenshot(path=str(shot))
                found = axe.blocking(axe.violations(page))
                rows.append(
                    {
                        "account": account,
                        "slug": entry.slug,
                        "url": page.url.removeprefix(base),
                        "status": status,
                        "expected": entry.status,
                        "axe": len(found),
                        "axe_ids": sorted({v["id"] for v in found}),
                    }
                )
                flag = "" if status == entry.status else f"  UNEXPECTED: expected {entry.status}"
                print(f"  {account}/{entry.slug}.png  {status}  axe serious/critical: {len(found)}{flag}")
                for v in found:  # where, so a finding can be fixed without rerunning axe by hand
                    print(f"    {v['id']}: {[n.get('target') for n in v.get('nodes', [])][:5]}")
                if entry.slug == "reservations" and role_of(account) == pages.TENANT_ADMIN:
                    rows.append(offers_shot(page, account))
            context.close()
        browser.close()
    return rows


def offers_shot(page: Any, account: str) -> dict[str, object]:
    """The reservation form refusing a request over the tenant's quota, in whole nodes: the
    preview's offers (what fits now, later, or the queue), in nodes too."""
    from tests.e2e import axe

    page.get_by_test_id("res-size-by").select_option("nodes")
    page.get_by_test_id("res-size").fill(str(OFFERS_NODES))
    page.get_by_test_id("preview-offers").wait_for()
    page.wait_for_timeout(300)
    page.screenshot(path=str(OUT / account / "reservations-offers.png"))
    found = axe.blocking(axe.violations(page))
    print(f"  {account}/reservations-offers.png  200  axe serious/critical: {len(found)}")
    return {
        "account": account,
        "slug": "reservations-offers",
        "url": f"/reservations/ ({OFFERS_NODES} whole nodes typed)",
        "status": 200,
        "expected": 200,
        "axe": len(found),
        "axe_ids": sorted({v["id"] for v in found}),
    }


def readme(rows: list[dict[str, object]]) -> str:
    lines = [
        "# Screenshots for reviewers",
        "",
        "Generated by `make screenshots` (scripts/screenshots.py) from the demo seed: every page each demo",
        "account sees (the list is tests/e2e/pages.py, shared with the accessibility test), Chromium at",
        f"{VIEWPORT['width']}×{VIEWPORT['height']}. Do not edit by hand; run the target again.",
        "",
    ]
    for account in dict.fromkeys(str(r["account"]) for r in rows):
        lines += [f"## {account}", "", "| page | URL | HTTP | axe serious/critical |", "| --- | --- | --- | --- |"]
        for r in (r for r in rows if r["account"] == account):
            ids = f" ({', '.join(r['axe_ids'])})" if r["axe_ids"] else ""  # type: ignore[arg-type]
            lines.append(
                f"| [{r['slug']}]({account}/{r['slug']}.png) | `{r['url']}` | {r['status']} | {r['axe']}{ids} |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    DATA.mkdir(parents=True, exist_ok=True)
    subprocess.run(manage("migrate", "--no-input", "-v", "0"), check=True, cwd=ROOT)
    subprocess.run(manage("demo", "seed"), check=True, cwd=ROOT)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (DATA / "up.log").open("wb")
    server = subprocess.Popen(
        manage("up", "--host", "127.0.0.1", "--port", str(port)), cwd=ROOT, stdout=log, stderr=log
    )
    try:
        wait_up(base, server)
        ids = world_ids()
        if OUT.exists():
            for old in OUT.iterdir():
                if old.is_dir():
                    shutil.rmtree(old)
        rows = shoot(base, ids)
    finally:
        server.send_signal(signal.SIGTERM)  # `up` stops the lab it started on SIGTERM
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    (OUT / "README.md").write_text(readme(rows) + "\n", encoding="utf-8")
    print(f"{len(rows)} screenshots in {OUT.relative_to(ROOT)}/ (README.md lists them)")
    wrong = [f"{r['account']}/{r['slug']} answered {r['status']}" for r in rows if r["status"] != r["expected"]]
    blocked = [f"{r['account']}/{r['slug']}: {', '.join(r['axe_ids'])}" for r in rows if r["axe"]]  # type: ignore[arg-type]
    for line in wrong + blocked:
        print(f"ERROR: {line}", file=sys.stderr)
    return 1 if wrong or blocked else 0


if __name__ == "__main__":
    raise SystemExit(main())
