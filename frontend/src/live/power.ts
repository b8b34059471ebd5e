// Node power on the live canvas: the host boxes (a leaf's nodes) say how many of their nodes are
// off, booting, powering off or failed, in words and by their frame; the links of a node that is
// off (or going off, or booting) on purpose are down on purpose: drawn grey and dotted, never as
// the red dashes of a failure, and listed as such. States come from the REST snapshot (`power`)
// and the stream's `node.power` messages (console/telemetry/power.py); absent means on.

import type { Core } from "cytoscape";
import type { CanvasEdge } from "../designer/types";
import { h } from "../dom";

export interface NodePowerState {
  node_id: number;
  state: string;
  since: string | null;
  intended: boolean;
}

/** The glyphs and words of console/web/templatetags/power.py. */
export const POWER_WORDS: Record<string, [string, string]> = {
  on: ["", "on"],
  "powering-on": ["↑", "booting"],
  off: ["○", "powered off"],
  "powering-off": ["↓", "powering off"],
  failed: ["✕", "power failed"],
};
const ORDER = ["failed", "off", "powering-off", "powering-on"];
const PANEL_ROWS = 40;
const SHORT: Record<string, string> = { failed: "failed", off: "off", "powering-off": "going off", "powering-on": "booting" };

export function utc(iso: string | null): string {
  return iso ? `${iso.replace("T", " ").slice(0, 16)} UTC` : "";
}

export class PowerMarks {
  private states = new Map<string, NodePowerState>();
  private hostOfLink = new Map<string, string>();
  private linksOfHost = new Map<string, string[]>();
  private hostsOfBox = new Map<string, string[]>();
  private baseLabel = new Map<string, string>();

  constructor(private cy: Core, edges: CanvasEdge[], private operator: boolean) {
    for (const e of edges) {
      const box = [e.source, e.target].find((id) => id.startsWith("hosts:"));
      if (!box) continue;
      const hosts = new Set(this.hostsOfBox.get(box) ?? []);
      for (const lk of e.links ?? []) {
        const link = `${lk[2]}/${lk[3]}`; // telemetry names a link by its switch end
        this.hostOfLink.set(link, lk[0]);
        this.linksOfHost.set(lk[0], [...(this.linksOfHost.get(lk[0]) ?? []), link]);
        hosts.add(lk[0]);
      }
      this.hostsOfBox.set(box, [...hosts].sort());
    }
    cy.style()
      .selector("node.pw-any")
      .style({ "text-wrap": "wrap", height: 30, width: 84, "border-width": 2, "border-style": "dashed", "border-color": "#37474f" })
      .selector("node.pw-all-off")
      .style({ "background-color": "#455a64", color: "#fff", "border-style": "solid" })
      .selector("node.pw-failed")
      .style({ "background-color": "#ffebee", color: "#b71c1c", "border-color": "#c62828", "border-width": 3, "border-style": "solid" })
      .selector("edge.live-off")
      .style({ "line-color": "#78909c", "line-style": "dotted", width: 2, opacity: 1 })
      .update();
  }

  /** Every state anew (a snapshot); returns the links whose look may change. */
  reset(power: Record<string, NodePowerState>): void {
    this.states = new Map(Object.entries(power).filter(([, st]) => st.state !== "on"));
    this.draw();
  }

  /** One node's new state; returns its links (their edges are drawn again). */
  update(node: string, st: NodePowerState): string[] {
    if (st.state === "on") this.states.delete(node);
    else this.states.set(node, st);
    this.draw();
    return this.linksOfHost.get(node) ?? [];
  }

  /** The link's node is off, going off or booting as an operator or the policy wanted. */
  intendedOff(link: string): boolean {
    const host = this.hostOfLink.get(link);
    const st = host ? this.states.get(host) : undefined;
    return !!st && st.intended;
  }

  /** "node-003 powered off (on purpose)" for a link whose node is not on, else "". */
  linkNote(link: string): string {
    const host = this.hostOfLink.get(link);
    const st = host ? this.states.get(host) : undefined;
    return st && host ? `${host} ${POWER_WORDS[st.state]?.[1] ?? st.state}${st.intended ? " (on purpose)" : ""}` : "";
  }

  /** A host box's tooltip: its nodes that are not on, with since when. */
  boxTitle(box: string): string {
    const hosts = this.hostsOfBox.get(box) ?? [];
    const notOn = hosts.filter((n) => this.states.has(n)).map((n) => {
      const st = this.states.get(n)!;
      return `${n}: ${POWER_WORDS[st.state]?.[1] ?? st.state} since ${utc(st.since)}${st.intended ? "" : " (not intended)"}`;
    });
    return notOn.length ? notOn.join("\n") : `${hosts.length} nodes, all on`;
  }

  private draw(): void {
    this.cy.batch(() => {
      for (const [box, hosts] of this.hostsOfBox) {
        const el = this.cy.getElementById(box);
        if (el.empty()) continue;
        if (!this.baseLabel.has(box)) this.baseLabel.set(box, String(el.data("label")));
        const counts = new Map<string, number>();
        for (const host of hosts) {
          const st = this.states.get(host);
          if (st) counts.set(st.state, (counts.get(st.state) ?? 0) + 1);
        }
        const words = ORDER.filter((s) => counts.has(s)).map((s) => `${POWER_WORDS[s][0]}${counts.get(s)} ${SHORT[s]}`);
        el.data("label", words.length ? `${this.baseLabel.get(box)}\n${words.join(" ")}` : this.baseLabel.get(box));
        el.toggleClass("pw-any", words.length > 0);
        el.toggleClass("pw-failed", counts.has("failed"));
        el.toggleClass("pw-all-off", hosts.length > 0 && counts.get("off") === hosts.length);
      }
    });
    this.panel();
  }

  /** The side card: every node that is not on, failures first, with its power page for operators. */
  private panel(): void {
    const list = document.querySelector<HTMLElement>('[data-testid="power-nodes"]');
    if (!list) return;
    const rank = (s: string) => ORDER.indexOf(s);
    const rows = [...this.states.entries()].sort(([a, x], [b, y]) => rank(x.state) - rank(y.state) || a.localeCompare(b));
    // A policy may power off hundreds of a large fabric's nodes: the first ones (failures first)
    // and a count of the rest keep the card short.
    const more = rows.length - PANEL_ROWS;
    list.replaceChildren(...rows.slice(0, PANEL_ROWS).map(([name, st]) => {
      const [glyph, word] = POWER_WORDS[st.state] ?? ["", st.state];
      const label = this.operator ? h("a", { href: `/nodes/${st.node_id}/power/` }, name) : h("strong", {}, name);
      return h("li", { testid: "power-node", "data-node": name, "data-state": st.state, class: `power power-${st.state}` },
        h("span", { class: "power-glyph", "aria-hidden": "true" }, glyph), " ", label, ` ${word}`,
        h("span", { class: "muted" }, ` since ${utc(st.since)}${st.intended ? "" : " — not intended"}`));
    }), ...(more > 0 ? [h("li", { class: "muted", testid: "power-more" }, `and ${more} more nodes not on`)] : []));
  }
}

/** The legend's line on power. */
export function powerLegend(): HTMLElement {
  return h("p", { class: "legend-power", testid: "legend-power" },
    h("span", { class: "swatch off" }, "down on purpose (every down link of the bundle is a node's that is off, going off or booting)"), " ",
    h("strong", {}, "Node boxes"), ": a dashed frame and a count (○ off, ↓ going off, ↑ booting) when some of a leaf's nodes are not on; ",
    "dark when all are off; a red frame and ✕ when a node's power failed.");
}
