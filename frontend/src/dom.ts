// Building DOM from data without innerHTML: every string lands in textContent or an attribute.

type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (key === "testid") el.dataset.testid = String(value);
    // Through the CSSOM: the Content-Security-Policy blocks style attributes, not style properties.
    else if (key === "style") el.style.cssText = String(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function byTestId<T extends HTMLElement = HTMLElement>(id: string, root: ParentNode = document): T {
  const el = root.querySelector<T>(`[data-testid="${id}"]`);
  if (!el) throw new Error(`missing [data-testid=${id}]`);
  return el;
}

export function maybeTestId<T extends HTMLElement = HTMLElement>(id: string): T | null {
  return document.querySelector<T>(`[data-testid="${id}"]`);
}

export function debounce<A extends unknown[]>(fn: (...args: A) => void, ms: number) {
  let timer: number | undefined;
  return (...args: A) => {
    window.clearTimeout(timer);
    timer = window.setTimeout(() => fn(...args), ms);
  };
}

const number = new Intl.NumberFormat("en-US");
export const fmt = (value: number | null | undefined, suffix = ""): string =>
  value === null || value === undefined ? "–" : `${number.format(value)}${suffix}`;

export const money = (value: number): string =>
  `$${number.format(Math.round(value))}`;

export const kw = (watts: number): string => `${number.format(Math.round(watts / 100) / 10)} kW`;

export const tbps = (gbps: number): string =>
  gbps >= 1000 ? `${number.format(Math.round(gbps / 100) / 10)} Tb/s` : `${fmt(gbps)} Gb/s`;
