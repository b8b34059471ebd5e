// How the live canvas colours a bundle (the parallel links one canvas edge stands for) and the
// legend that states the rule. The rule: the colour of a bundle is the bucket of the MEAN
// utilisation of its links that are up (utilisation: the busier direction, % of line rate); the
// hottest link is named beside it (tooltip, link panel) so a bundle whose mean is moderate but
// whose single links are saturated still says so, and the number of busy links is shown.

import { h } from "../dom";
import type { LinkState } from "./types";

/** Upper bounds of buckets 0..4 (fraction of line rate); bucket 5 is above. Same as
 * console.telemetry.core.BUCKETS. */
export const BUCKETS = [0.01, 0.25, 0.5, 0.75, 0.9];
export const BUCKET_COLOURS = ["#9aa7b4", "#2e7d32", "#9e9d24", "#f9a825", "#ef6c00", "#c62828"];
export const BUCKET_LABELS = ["idle (< 1 %)", "1–25 %", "25–50 %", "50–75 %", "75–90 %", "≥ 90 %"];
/** "Busy": a link at or above this fraction of its line rate (console.telemetry.core.BUSY_AT). */
export const BUSY_AT = 0.75;
export const BUSY_WORD = `busy (≥ ${BUSY_AT * 100} % utilisation)`;

export function bucketOf(util: number): number {
  let b = 0;
  while (b < BUCKETS.length && util >= BUCKETS[b]) b++;
  return b;
}

export interface Bundle {
  links: number;
  down: number;
  errors: number;
  mine: boolean;
  mean: number;
  hottest: { id: string; util: number } | null;
  busy: number;
  bucket: number;
  wait: number; // PortXmitWait ticks/s summed over the bundle
}

/** The bundle of ``ids`` from the links' last states. */
export function bundleOf(ids: string[], links: Map<string, LinkState>, isMine: (id: string) => boolean): Bundle {
  const b: Bundle = { links: ids.length, down: 0, errors: 0, mine: false, mean: 0, hottest: null, busy: 0, bucket: 0, wait: 0 };
  let sum = 0;
  let up = 0;
  for (const id of ids) {
    if (isMine(id)) b.mine = true;
    const st = links.get(id);
    if (!st) continue;
    for (const name in st.errors) b.errors += st.errors[name];
    b.wait += st.xmit_wait ?? 0;
    if (!st.up) {
      b.down += 1;
      continue;
    }
    up += 1;
    sum += st.util;
    if (st.util >= BUSY_AT) b.busy += 1;
    if (!b.hottest || st.util > b.hottest.util) b.hottest = { id, util: st.util };
  }
  b.mean = up ? sum / up : 0;
  b.bucket = up ? bucketOf(b.mean) : 0;
  return b;
}

export function pct(util: number): string {
  return `${Math.round(util * 100)} %`;
}

/** "leaf03/17" → "leaf03 p17". */
export function portName(link: string): string {
  const at = link.lastIndexOf("/");
  return at < 0 ? link : `${link.slice(0, at)} p${link.slice(at + 1)}`;
}

/** "mean 34 %, hottest 92 % on leaf03 p17 · 10 of 32 busy" */
export function bundleText(b: Bundle): string {
  if (!b.hottest) return b.down ? `${b.down} of ${b.links} down` : "no data yet";
  const parts = [b.links > 1 ? `mean ${pct(b.mean)}, hottest ${pct(b.hottest.util)} on ${portName(b.hottest.id)}` : `${pct(b.mean)}`];
  if (b.links > 1) parts.push(`${b.busy} of ${b.links} busy`);
  if (b.down) parts.push(`${b.down} down`);
  if (b.wait) parts.push(`xmit wait ${Math.round(b.wait).toLocaleString("en-US")} ticks/s`);
  return parts.join(" · ");
}

/** The legend: the colour rule, the scale with its unit, what busy, down, ⚠ and xmit wait mean. */
export function legend(operator: boolean): HTMLElement[] {
  const whose = operator ? "" : " that belong to your reservations";
  return [
    h("p", { class: "legend-rule", testid: "legend-rule" },
      `Colour: mean utilisation of the links a line stands for${whose} (a bundle of parallel links; the busier direction, % of line rate). `,
      "Hover or click a line for its hottest link."),
    h("div", { class: "legend-scale", testid: "legend-scale" },
      h("span", { class: "muted" }, "utilisation (% of line rate):"),
      ...BUCKET_LABELS.map((label, i) => h("span", { class: "swatch", style: `--c:${BUCKET_COLOURS[i]}` }, label)),
      h("span", { class: "swatch down" }, "down (any link of the bundle)")),
    h("p", { class: "legend-terms", testid: "legend-terms" },
      h("strong", {}, "busy"), ` = a link at ≥ ${BUSY_AT * 100} % utilisation (the two top colours). `,
      h("strong", {}, "⚠ n"), " = error counter increments in the last sweep. ",
      h("strong", {}, "xmit wait"), " = PortXmitWait ticks per second: the port had data to send and no credit (congestion)."),
  ];
}
