// The preview of the reservation form, in words: where it lands, what it costs, how much of the
// quota it uses, or why it cannot be placed and what would fit instead (one-click offers).

import { h } from "../dom";
import type { Offer, Preview } from "./types";

/** What the form may do after a preview: reserve as asked, or nothing but take an offer. */
export interface Verdict {
  canReserve: boolean;
  label: string; // the Reserve button's text
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

function utc(iso: string): string {
  return `${iso.slice(0, 16).replace("T", " ")} UTC`;
}

export function money(amount: string, currency: string): string {
  try {
    return new Intl.NumberFormat("en-US", { style: "currency", currency }).format(Number(amount));
  } catch {
    return `${amount} ${currency}`; // an unknown currency code: the figure and the code
  }
}

function costLine(p: Preview): HTMLElement {
  return h(
    "p",
    { class: "res-cost", testid: "preview-cost" },
    h("strong", {}, `≈ ${money(p.cost, p.currency)}`),
    ` for ${Number(p.gpu_hours).toLocaleString("en-US")} GPU-hours`,
  );
}

function quotaLine(p: Preview): HTMLElement {
  const q = p.quota;
  const after = q.held_gpus + p.gpus;
  let text: string;
  if (q.limit_gpus === 0) text = "You have no quota in this pool: ask an operator.";
  else if (after <= q.guaranteed_gpus)
    text = `Uses ${p.gpus} of your ${q.guaranteed_gpus} guaranteed GPUs` + (q.held_gpus ? ` (${after} with what you already hold then).` : ".");
  else if (after <= q.limit_gpus)
    text =
      `Uses your guaranteed GPUs (${q.guaranteed_gpus}) and borrows ${after - Math.max(q.guaranteed_gpus, q.held_gpus)} ` +
      `of ${q.limit_gpus - q.guaranteed_gpus} borrowable: borrowed GPUs can be taken back by their owners.`;
  else
    text =
      `Your quota here is ${q.limit_gpus} GPUs` +
      (q.held_gpus ? `; you already hold up to ${q.held_gpus} in that window.` : ".");
  return h("p", { class: "muted", testid: "preview-quota" }, text);
}

function whereLine(p: Preview): HTMLElement[] {
  const pl = p.placement!;
  const close = pl.leaf_groups.length === 1 ? "close together" : "spread over the fabric";
  const reach =
    pl.max_switch_hops === 0 || pl.leaves.length === 1
      ? "all under one leaf switch"
      : `${plural(pl.leaf_groups.length, "leaf group")}, at most ${plural(pl.max_switch_hops, "switch hop")} between any two`;
  const facts = h(
    "dl",
    { class: "res-facts" },
    h("dt", {}, "Leaf groups"), h("dd", { testid: "preview-groups" }, pl.leaf_groups.join(", ")),
    h("dt", {}, "Leaves"), h("dd", {}, pl.leaves.join(", ")),
    h("dt", {}, "Spines"), h("dd", {}, pl.spines.length ? pl.spines.join(", ") : "none (one leaf group)"),
    h("dt", {}, "Nodes"), h("dd", { testid: "preview-nodes" }, pl.nodes.join(", ")),
    ...(pl.sharp?.length
      ? [h("dt", {}, "SHARP tree"), h("dd", { testid: "preview-sharp" }, pl.sharp.join(", "))]
      : []),
  );
  return [
    h(
      "p",
      { class: "res-where", testid: "preview-summary" },
      `${p.gpus} GPUs on ${plural(pl.nodes.length, "node")}, ${close}: ${reach}` +
        `${pl.rail_aligned ? ", rail-aligned" : ""}${p.borrowed ? " (borrowed capacity)" : ""}.`,
    ),
    h("p", { class: "muted small", testid: "preview-window" }, `From ${utc(p.start)} to ${utc(p.end)}.`),
    h("details", { class: "res-exact" }, h("summary", {}, "Which switches and nodes"), facts),
  ];
}

/** A pool at several sites: where it goes and why (nearer later or farther now, or the span's cost). */
function siteLine(p: Preview): HTMLElement | null {
  const message = p.site_choice?.message;
  return typeof message === "string" ? h("p", { class: "res-site", testid: "preview-site" }, message) : null;
}

/** Why not, in a sentence a tenant reads at a glance. */
function refusal(p: Preview): string {
  const r = p.rejection;
  const q = p.quota;
  switch (r?.reason) {
    case "over_quota":
      return `That is over quota: ${p.gpus} GPUs asked, ${Math.max(0, q.limit_gpus - q.held_gpus)} of your ${q.limit_gpus} left in that window.`;
    case "no_quota":
      return "You have no quota in this pool: ask an operator, or pick another pool.";
    case undefined:
      return "It cannot be placed.";
    default:
      return `Not enough free GPUs for ${p.gpus} GPUs with these options in that window.`;
  }
}

function offerButtons(p: Preview, take: (o: Offer) => void): HTMLElement | null {
  if (!p.offers.length) return null;
  return h(
    "div",
    { class: "res-offers", testid: "preview-offers" },
    h("p", {}, "What fits instead (one click reserves it):"),
    h(
      "div",
      { class: "offer-buttons" },
      ...p.offers.map((o) => {
        const button = h(
          "button",
          { type: "button", class: o.kind === "queue" ? "offer" : "offer primary", testid: "offer", "data-kind": o.kind, "data-gpus": String(o.gpus), "data-nodes": o.nodes == null ? "" : String(o.nodes) },
          o.label,
        );
        button.addEventListener("click", () => take(o));
        return button;
      }),
    ),
  );
}

/** Render ``p`` into ``out`` (its state badge in ``state``); ``asap``: the form asks for "as soon
 * as possible", so a request that does not fit now is queued by Reserve itself. */
export function renderPreview(p: Preview, asap: boolean, state: HTMLElement, out: HTMLElement, take: (o: Offer) => void): Verdict {
  const present = (...nodes: (HTMLElement | null)[]) => nodes.filter((n): n is HTMLElement => n !== null);
  if (p.placeable && p.placement) {
    state.textContent = "placeable";
    state.className = "badge ok";
    out.replaceChildren(
      ...present(
        ...whereLine(p),
        siteLine(p),
        costLine(p),
        quotaLine(p),
        p.preempts.length
          ? h("p", { class: "warn", testid: "preview-preempts" }, `Takes back GPUs another tenant borrowed (${plural(p.preempts.length, "reservation")}).`)
          : null,
      ),
    );
    return { canReserve: true, label: "Reserve" };
  }
  const queues = asap && p.offers.some((o) => o.kind === "queue");
  state.textContent = queues ? "will queue" : "refused";
  state.className = queues ? "badge warn" : "badge bad";
  out.replaceChildren(
    ...present(
      h("p", { class: queues ? "warn" : "error", testid: "preview-rejection" }, refusal(p)),
      p.rejection?.message
        ? h("details", { class: "res-exact" }, h("summary", {}, "The scheduler's reason"), h("p", { class: "small" }, p.rejection.message))
        : null,
      siteLine(p),
      queues ? h("p", { testid: "preview-queue-note" }, "It does not fit now: Reserve puts it in the queue, placed as soon as it fits.") : null,
      costLine(p),
      quotaLine(p),
      offerButtons(p, take),
    ),
  );
  return queues ? { canReserve: true, label: "Queue it" } : { canReserve: false, label: "Reserve" };
}
