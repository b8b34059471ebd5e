"""Deque's axe-core in a Playwright page, from Python.

``@axe-core/playwright`` is a JavaScript wrapper, and the browser tests are Python; it does no
more than this module: evaluate ``axe.min.js`` (the npm package ``axe-core``, pinned in
frontend/package.json) in the page and call ``axe.run()``. The evaluation goes through the
DevTools protocol, which the page's Content-Security-Policy does not govern, so the strict CSP
stays as served (no ``<script>`` tag is added, which it would refuse).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

AXE_JS = Path(__file__).resolve().parents[2] / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
#: WCAG 2.0 and 2.1, levels A and AA.
TAGS = ("wcag2a", "wcag2aa", "wcag21a", "wcag21aa")
#: What fails the test; "minor" and "moderate" findings are reported by axe but not gating.
BLOCKING = frozenset({"serious", "critical"})

_RUN = """async ([tags, exclude]) => {
  const context = exclude.length ? {include: [["html"]], exclude: exclude.map((s) => [s])} : document;
  const result = await window.axe.run(context, {runOnly: {type: "tag", values: tags}, resultTypes: ["violations"]});
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map((n) => ({target: n.target.join(" "), summary: n.failureSummary || ""})),
  }));
}"""


def violations(page: Any, exclude: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """axe's WCAG 2.1 AA violations in ``page`` as it is now (every impact), leaving out the
    elements the CSS selectors ``exclude`` match (and their content)."""
    if not page.evaluate("typeof window.axe === 'object'"):
        page.evaluate(AXE_JS.read_text(encoding="utf-8") + "\n;void 0")
        if not page.evaluate("typeof window.axe === 'object'"):
            raise RuntimeError("axe-core did not load in the page")
    return list(page.evaluate(_RUN, [list(TAGS), list(exclude)]))


def blocking(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [v for v in found if v["impact"] in BLOCKING]


def describe(where: str, found: list[dict[str, Any]]) -> str:
    lines = []
    for v in found:
        lines.append(f"{where}: [{v['impact']}] {v['id']}: {v['help']}")
        for node in v["nodes"][:8]:
            reasons = node["summary"].splitlines()[1:2]  # after "Fix any/all of the following:", the first
            lines.append(f"    {node['target']}  {reasons[0].strip() if reasons else ''}")
        if len(v["nodes"]) > 8:
            lines.append(f"    … and {len(v['nodes']) - 8} more")
    return "\n".join(lines)
