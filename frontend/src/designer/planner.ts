// The new-design page: parameters with instant preview, the comparison table and "Save design".

import { api, ApiError } from "../api";
import { byTestId, debounce, fmt, h, kw, maybeTestId, money, tbps } from "../dom";
import { renderSummary } from "./metrics";
import type { CompareResult, Design, PageInit, PlanOptions, Summary, Topology } from "./types";

const NUMBER_FIELDS = ["gpus_per_node", "hcas_per_node", "hosts_per_switch"] as const;

export function readOptions(form: HTMLFormElement): PlanOptions {
  const data = new FormData(form);
  const value = (name: string) => String(data.get(name) ?? "").trim();
  const topology = value("topology") as Topology;
  const nodeType = value("node_type");
  const options: PlanOptions = {
    topology,
    node_type: nodeType,
    switch: value("switch"),
    oversubscription: value("oversubscription") || "1:1",
    levels: value("levels") || "auto",
  };
  const size = Number(value("size"));
  if (value("size") !== "") options[value("size_by") === "nodes" ? "nodes" : "gpus"] = size;
  for (const name of NUMBER_FIELDS) {
    if (name !== "hosts_per_switch" && nodeType !== "generic") continue;
    if (value(name) !== "") options[name] = Number(value(name));
  }
  if (topology === "torus" && value("dims")) options.dims = value("dims");
  if (topology !== "torus" && topology !== "dragonfly-plus") delete options.hosts_per_switch;
  if (topology === "rail-optimized" && data.get("manager_slot")) options.manager_slot = true;
  return options;
}

function showRelevantFields(form: HTMLFormElement): void {
  const topology = (form.elements.namedItem("topology") as HTMLSelectElement).value;
  const nodeType = (form.elements.namedItem("node_type") as HTMLSelectElement).value;
  for (const el of form.querySelectorAll<HTMLElement>("[data-show]")) {
    const keys = (el.dataset.show ?? "").split(" ");
    el.hidden = !(keys.includes(topology) || (keys.includes("generic") && nodeType === "generic"));
  }
}

interface ComparisonRow {
  options: PlanOptions;
  summary: Summary;
}

function optionLabel(o: PlanOptions): string {
  const size = o.gpus !== undefined ? `${fmt(Number(o.gpus))} GPUs` : `${fmt(Number(o.nodes))} nodes`;
  const extra = o.oversubscription && o.oversubscription !== "1:1" ? ` ${o.oversubscription}` : "";
  return `${o.topology} · ${size} · ${o.switch}${extra}`;
}

function renderComparison(rows: ComparisonRow[], onRemove: (i: number) => void): void {
  const table = byTestId<HTMLTableElement>("comparison");
  byTestId("comparison-empty").hidden = rows.length > 0;
  table.hidden = rows.length === 0;
  const head = ["Parameters", "Network cost", "Network power", "Switches", "Cables", "Transceivers", "Hops", "Bisection", ""];
  table.tHead!.replaceChildren(h("tr", {}, ...head.map((c) => h("th", {}, c))));
  const body = table.tBodies[0];
  body.replaceChildren(
    ...rows.map((row, i) => {
      const s = row.summary;
      const remove = h("button", { type: "button", class: "link-button", testid: "remove-comparison" }, "remove");
      remove.addEventListener("click", () => onRemove(i));
      return h(
        "tr",
        { testid: "comparison-row", class: s.errors.length ? "has-errors" : undefined },
        h("td", {}, optionLabel(row.options), s.errors.length ? h("div", { class: "error" }, s.errors[0]) : null),
        h("td", { class: "num", testid: "cmp-cost" }, money(s.cost)),
        h("td", { class: "num", testid: "cmp-power" }, kw(s.power_w)),
        h("td", { class: "num", testid: "cmp-switches" }, fmt(s.switches.total)),
        h("td", { class: "num", testid: "cmp-cables" }, fmt(s.cables.total)),
        h("td", { class: "num" }, fmt(s.transceivers)),
        h("td", { class: "num", testid: "cmp-hops" }, fmt(s.diameter_switch_hops)),
        h("td", { class: "num", testid: "cmp-bisection" }, tbps(s.bisection_bandwidth_gbps)),
        h("td", {}, remove),
      );
    }),
  );
}

export function startPlanner(init: PageInit): void {
  const form = document.getElementById("plan-form") as HTMLFormElement;
  const preview = byTestId("preview");
  const state = byTestId("preview-state");
  let sequence = 0;

  const refresh = async () => {
    showRelevantFields(form);
    const mine = ++sequence;
    state.textContent = "planning…";
    const options = readOptions(form);
    let summary: Summary | undefined;
    let failure = "";
    try {
      summary = await api<Summary>("/api/designs/plan/", { method: "POST", body: JSON.stringify(options) });
    } catch (err) {
      if (err instanceof ApiError) {
        summary = (err.body as unknown as { summary?: Summary }).summary;
        failure = err.body.detail;
      } else failure = String(err);
    }
    if (mine !== sequence) return; // a newer request owns the panel
    if (summary) renderSummary(preview, summary);
    else preview.replaceChildren(h("p", { class: "error", testid: "preview-error" }, failure));
    state.textContent = summary && !summary.errors.length ? "ok" : "errors";
    state.dataset.state = state.textContent;
    form.dataset.planned = String(mine);
  };
  const schedule = debounce(() => void refresh(), 250);
  form.addEventListener("input", schedule);
  form.addEventListener("change", schedule);
  form.addEventListener("submit", (e) => e.preventDefault());
  void refresh();

  // Comparison: every row is re-planned by the compare API so all columns come from one call.
  let compared: PlanOptions[] = [];
  const redraw = async () => {
    if (!compared.length) return renderComparison([], () => undefined);
    const result = await api<CompareResult>("/api/designs/compare/", {
      method: "POST",
      body: JSON.stringify({ options: compared }),
    });
    renderComparison(
      compared.map((options, i) => ({ options, summary: result.rows[i] })),
      (i) => {
        compared = compared.filter((_, j) => j !== i);
        void redraw();
      },
    );
  };
  byTestId("add-comparison").addEventListener("click", () => {
    compared = [...compared, readOptions(form)];
    void redraw();
  });

  const save = document.getElementById("save-form") as HTMLFormElement | null;
  if (!save || !init.editable) return;
  save.addEventListener("submit", async (e) => {
    e.preventDefault();
    const error = maybeTestId("save-error")!;
    error.textContent = "";
    const data = new FormData(save);
    try {
      const design = await api<Design>("/api/designs/", {
        method: "POST",
        body: JSON.stringify({
          name: String(data.get("name") ?? "").trim(),
          description: String(data.get("description") ?? "").trim(),
          options: readOptions(form),
        }),
      });
      window.location.assign(`/designer/${design.id}/`);
    } catch (err) {
      error.textContent = err instanceof ApiError ? explain(err) : String(err);
    }
  });
}

export function explain(err: ApiError): string {
  const fields = Object.entries(err.body.fields ?? {})
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join("; ") : JSON.stringify(v)}`)
    .join(" · ");
  return fields && !fields.includes(err.body.detail) ? `${err.body.detail} (${fields})` : err.body.detail;
}
