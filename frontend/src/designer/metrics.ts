// One rendering of a plan/validation summary, used by the preview and by the canvas validation.

import { fmt, h, kw, money, tbps } from "../dom";
import type { Issue, Summary } from "./types";

function tierTable(title: string, key: string, counts: Record<string, number>): HTMLElement {
  const rows = Object.entries(counts).filter(([tier]) => tier !== "total");
  return h(
    "table",
    { class: "grid compact", testid: `sum-${key}` },
    h("thead", {}, h("tr", {}, h("th", {}, title), h("th", { class: "num" }, ""))),
    h(
      "tbody",
      {},
      ...rows.map(([tier, n]) =>
        h("tr", {}, h("td", {}, tier.replace(/_/g, "–")), h("td", { class: "num", testid: `sum-${key}-${tier}` }, fmt(n))),
      ),
      h("tr", { class: "total" }, h("td", {}, "total"), h("td", { class: "num", testid: `sum-${key}-total` }, fmt(counts.total ?? 0))),
    ),
  );
}

// Findings about the lab tooling (ibsim's limits, the lab's size), not about the design itself.
const TOOLING_CODES = new Set(["ibsim-limit", "lab-size"]);

function issueItems(items: Issue[], testid: string): HTMLElement {
  return h(
    "ul",
    { class: "issues", testid },
    ...items.map((i) =>
      h(
        "li",
        { class: `issue issue-${i.severity}`, testid: "issue", "data-severity": i.severity, "data-code": i.code },
        h("span", { class: "sev" }, i.severity),
        i.element ? h("code", {}, i.element) : null,
        " ",
        i.message,
      ),
    ),
  );
}

export function issueList(issues: Issue[], errors: string[], warnings: string[]): HTMLElement {
  const items: Issue[] = issues.length
    ? issues
    : [
        ...errors.map((message) => ({ severity: "error", code: "", element: "", message })),
        ...warnings.map((message) => ({ severity: "warning", code: "", element: "", message })),
      ];
  const design = items.filter((i) => !TOOLING_CODES.has(i.code));
  const tooling = items.filter((i) => TOOLING_CODES.has(i.code));
  return h(
    "div",
    { class: "findings" },
    h("h3", { class: "findings-title" }, "Design findings"),
    design.length
      ? issueItems(design, "issues")
      : h("p", { class: "ok", testid: "issues-none" }, "No problems found in the design."),
    tooling.length
      ? h(
          "div",
          { class: "tooling-notes", testid: "tooling-notes" },
          h("h3", { class: "findings-title" }, "Lab tooling notes"),
          h("p", { class: "muted" }, "About the simulator used to test a design, not about the design."),
          issueItems(tooling, "tooling-issues"),
        )
      : null,
  );
}

export function renderSummary(target: HTMLElement, s: Summary): void {
  const figures: [string, string, string][] = [
    ["GPUs", "gpus", fmt(s.gpus)],
    ["Nodes", "nodes", fmt(s.nodes)],
    ["Endpoints", "endpoints", fmt(s.endpoints)],
    ["Transceivers", "transceivers", fmt(s.transceivers)],
    ["Oversubscription", "oversubscription", s.oversubscription ?? "–"],
    ["Bisection", "bisection", tbps(s.bisection_bandwidth_gbps)],
    ["Diameter", "diameter", s.diameter_switch_hops === null ? "–" : `${s.diameter_switch_hops} switch hops`],
    ["Network power", "power", kw(s.power_w)],
    ["Nodes' power", "compute-power", kw(s.compute_power_w ?? 0)],
    ["Total power", "total-power", kw(s.power_w + (s.compute_power_w ?? 0))],
    ["Network cost", "cost", money(s.cost)],
    ["Nodes' cost", "compute-cost", money(s.compute_cost ?? 0)],
    ["Total cost", "total-cost", money(s.cost + (s.compute_cost ?? 0))],
  ];
  const errors = s.errors ?? [];
  const warnings = s.warnings ?? [];
  const notes = (s.issues ?? []).filter((i) => TOOLING_CODES.has(i.code)).length;
  const designWarnings = warnings.length - notes;
  target.replaceChildren(
    h(
      "p",
      { class: `verdict ${errors.length ? "bad" : "good"}`, testid: "verdict" },
      errors.length
        ? `${errors.length} error${errors.length === 1 ? "" : "s"}`
        : `${s.topology}: buildable`,
      designWarnings > 0 ? ` · ${designWarnings} warning${designWarnings === 1 ? "" : "s"}` : "",
      notes ? ` · ${notes} lab tooling note${notes === 1 ? "" : "s"}` : "",
    ),
    h("div", { class: "tier-tables" }, tierTable("Switches", "switches", s.switches ?? {}), tierTable("Cables", "cables", s.cables ?? {})),
    h(
      "dl",
      { class: "figures" },
      ...figures.flatMap(([label, key, value]) => [h("dt", {}, label), h("dd", { testid: `sum-${key}` }, value)]),
    ),
    issueList(s.issues ?? [], errors, warnings),
  );
}
