// Availability timelines: free GPUs of each pool, slot by slot, as a bar chart in CSS.

import { api } from "../api";
import { h } from "../dom";
import type { Availability, PoolInfo } from "./types";

const HOURS = 72;
const STEP_MINUTES = 180;

function label(iso: string): string {
  const d = new Date(iso);
  return `${d.toISOString().slice(5, 10)} ${d.toISOString().slice(11, 16)} UTC`;
}

export async function renderTimelines(root: HTMLElement, apiBase: string, pools: PoolInfo[]): Promise<void> {
  if (!pools.length) {
    root.replaceChildren(h("p", { class: "muted" }, "No pools yet."));
    return;
  }
  const blocks = await Promise.all(
    pools.map(async (pool) => {
      try {
        const a = await api<Availability>(
          `${apiBase}pools/${pool.id}/availability/?hours=${HOURS}&step_minutes=${STEP_MINUTES}`,
        );
        return timeline(pool, a);
      } catch {
        return h("p", { class: "error" }, `Availability of ${pool.name} could not be loaded.`);
      }
    }),
  );
  root.replaceChildren(...blocks);
}

function timeline(pool: PoolInfo, a: Availability): HTMLElement {
  const total = Math.max(1, a.total_gpus);
  const least = a.slots.reduce((m, s) => Math.min(m, s.free_gpus), Infinity);
  const bars = a.slots.map((s) => {
    const pct = Math.round((100 * s.free_gpus) / total);
    const level = pct >= 50 ? "hi" : pct >= 15 ? "mid" : "lo";
    return h(
      "div",
      {
        class: `tl-slot tl-${level}`,
        testid: "timeline-slot",
        "data-free": s.free_gpus,
        title: `${label(s.start)}–${label(s.end)} UTC: ${s.free_gpus} free GPUs, ${s.free_nodes} free nodes, largest free leaf group ${s.largest_free_leaf_group_nodes} nodes`,
      },
      h("span", { class: "tl-bar", style: `height: ${pct}%` }),
    );
  });
  const ticks = a.slots.map((s, i) =>
    h("span", { class: "tl-tick" }, i % 8 === 0 ? label(s.start) : ""),
  );
  return h(
    "div",
    { class: "timeline", testid: "timeline", "data-pool": pool.name },
    h(
      "div",
      { class: "tl-head" },
      h("strong", {}, pool.name),
      h("span", { class: "muted" }, ` ${a.total_gpus} GPUs · ${a.total_nodes} nodes · ${a.leaf_groups} leaf group${a.leaf_groups === 1 ? "" : "s"} · free now `),
      h("strong", { testid: "timeline-free-now" }, String(a.slots[0]?.free_gpus ?? 0)),
      h("span", { class: "muted" }, ` · fewest free ahead ${Number.isFinite(least) ? least : 0}`),
    ),
    h("div", { class: "tl-bars" }, ...bars),
    h("div", { class: "tl-ticks" }, ...ticks),
  );
}
