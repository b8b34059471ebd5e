// Small time-series charts of the live page (a link's last minute and its hour of history) as
// SVG with their axes: the y axis with its unit and min/max ticks, the x axis with the first and
// last sample's time (24-hour UTC). Hand-written SVG, as the page drew its sparklines before:
// two line charts do not justify a charting library in the bundle, and SVG needs no inline style
// (the strict CSP).

const NS = "http://www.w3.org/2000/svg";
const PAD = { left: 46, right: 8, top: 8, bottom: 18 };

export interface ChartOptions {
  /** the y axis's unit, shown on its ticks ("%", "Gb/s") */
  unit: string;
  /** the y axis's top (the data's maximum if larger); 0: the data's maximum */
  yMax?: number;
  width?: number;
  height?: number;
  cls?: string;
  label: string;
}

/** "14:05:09 UTC" of a unix time in milliseconds. */
export function utcTime(ms: number): string {
  return `${new Date(ms).toISOString().slice(11, 19)} UTC`;
}

function el<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, text?: string): SVGElementTagNameMap[K] {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function tick(value: number, unit: string): string {
  const digits = value >= 10 || value === 0 ? 0 : value >= 1 ? 1 : 2;
  return `${value.toFixed(digits)} ${unit}`;
}

/** A line chart of ``points`` ([unix ms, value]) with both axes labelled. */
export function timeChart(points: [number, number][], opts: ChartOptions): SVGSVGElement {
  const w = opts.width ?? 320;
  const hgt = opts.height ?? 90;
  const svg = el("svg", { viewBox: `0 0 ${w} ${hgt}`, class: `chart ${opts.cls ?? ""}`.trim(), role: "img", "aria-label": opts.label });
  svg.dataset.unit = opts.unit;
  const x0 = PAD.left;
  const x1 = w - PAD.right;
  const y0 = hgt - PAD.bottom;
  const y1 = PAD.top;
  // (no samples, or all zero: a 0–1 axis rather than a degenerate one)
  const top = points.reduce((m, p) => Math.max(m, p[1]), opts.yMax ?? 0);
  const max = top > 0 ? top : 1;
  const t0 = points.length ? points[0][0] : Date.now();
  const t1 = points.length ? points[points.length - 1][0] : t0;
  const span = Math.max(1, t1 - t0);
  const xOf = (t: number) => x0 + ((t - t0) / span) * (x1 - x0);
  const yOf = (v: number) => y0 - (v / max) * (y0 - y1);
  svg.append(
    el("line", { x1: x0, y1: y0, x2: x1, y2: y0, class: "axis" }),
    el("line", { x1: x0, y1: y0, x2: x0, y2: y1, class: "axis" }),
    el("text", { x: x0 - 4, y: y0, "text-anchor": "end", class: "tick", "data-axis": "y", "data-at": "min" }, tick(0, opts.unit)),
    el("text", { x: x0 - 4, y: y1 + 8, "text-anchor": "end", class: "tick", "data-axis": "y", "data-at": "max" }, tick(max, opts.unit)),
    el("text", { x: x0, y: hgt - 4, "text-anchor": "start", class: "tick", "data-axis": "x", "data-at": "min" }, utcTime(t0)),
    el("text", { x: x1, y: hgt - 4, "text-anchor": "end", class: "tick", "data-axis": "x", "data-at": "max" }, utcTime(t1)),
  );
  if (points.length) {
    const pts = points.map(([t, v]) => `${xOf(t).toFixed(1)},${yOf(v).toFixed(1)}`);
    svg.append(el("polyline", { points: pts.join(" "), class: "series" }));
  } else {
    svg.append(el("text", { x: (x0 + x1) / 2, y: (y0 + y1) / 2, "text-anchor": "middle", class: "tick" }, "no samples yet"));
  }
  return svg;
}
