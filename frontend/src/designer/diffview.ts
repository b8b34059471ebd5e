// The legend of a revision diff drawn on the canvas: what each colour means and how many switches
// and cables are added, removed or changed, with a button that leaves the diff.

import { h } from "../dom";
import { DIFF_COLOURS } from "./canvas";
import type { CanvasView, DiffStatus } from "./types";

const WORDS: Record<DiffStatus, string> = { added: "added", removed: "removed (dashed)", changed: "changed" };

export function renderDiffLegend(host: HTMLElement, view: CanvasView | null, from: number, to: number, clear: () => void): void {
  host.hidden = !view?.diff;
  if (!view?.diff) return host.replaceChildren();
  const diff = view.diff;
  const close = h("button", { type: "button", testid: "diff-clear" }, "Hide diff");
  close.addEventListener("click", clear);
  host.replaceChildren(
    h("strong", {}, `Diff r${from} → r${to} on the canvas`),
    ...(["added", "removed", "changed"] as const).map((s) =>
      h("span", { class: "diff-key", testid: `legend-${s}` },
        h("span", { class: "swatch", style: `background:${DIFF_COLOURS[s]}` }),
        `${WORDS[s]}: ${diff.switches[s]} switches, ${diff.cables[s]} cables`)),
    h("span", { class: "muted" }, "A box or bundle holding changes is coloured as changed; open it for the parts."),
    close,
  );
}
