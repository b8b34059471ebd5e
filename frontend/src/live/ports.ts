// The switch level of detail: one switch's port table (port, peer, state, rate, Tx/Rx,
// utilisation, error counters). The rows come from the telemetry API once, then follow the live
// stream: rows are keyed by link id and only the cells a delta changes are rewritten in place.

import { api, ApiError } from "../api";
import { h } from "../dom";
import type { LinkState, SwitchPort, SwitchPorts } from "./types";

export interface PortTableOptions {
  fabric: number;
  operator: boolean;
  /** The stream's current state of a link (fresher than the table's first answer). */
  live(link: string): LinkState | undefined;
  /** A row's counters, sparkline and history. */
  pick(link: string, title: string): void;
  /** Another switch named as a peer. */
  open(name: string): void;
  /** The table was closed. */
  closed(): void;
}

interface Row {
  data: SwitchPort;
  el: HTMLTableRowElement;
  state: HTMLElement;
  tx: HTMLElement;
  rx: HTMLElement;
  util: HTMLElement;
  wait: HTMLElement;
  errors: HTMLElement;
}

const SHORT: Record<string, string> = {
  SymbolErrorCounter: "symbol",
  LinkDownedCounter: "link downed",
  LinkErrorRecoveryCounter: "link recoveries",
  PortRcvErrors: "rcv errors",
  PortXmitDiscards: "xmit discards",
};

function bps(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  return `${(value / 1e9).toFixed(2)} Gb/s`;
}

function waitText(value: number | null | undefined): string {
  if (value === null || value === undefined) return "–";
  return `${Math.round(value).toLocaleString("en-US")}/s`;
}

function errorText(delta: Record<string, number>, totals: Record<string, number>): string {
  const names = [...new Set([...Object.keys(totals), ...Object.keys(delta)])].sort();
  if (!names.length) return "0";
  return names
    .map((n) => `${SHORT[n] ?? n} ${totals[n] ?? 0}${delta[n] ? ` (+${delta[n]})` : ""}`)
    .join(", ");
}

function set(el: HTMLElement, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

/** Column heads (with units) and what each says. */
const PORT_COLUMNS: [string, string][] = [
  ["Port", ""],
  ["Peer", ""],
  ["State", ""],
  ["Rate", "link width and speed"],
  ["Tx (Gb/s)", "sent by this port"],
  ["Rx (Gb/s)", "received by this port"],
  ["Util (%)", "busier direction, % of line rate"],
  ["Xmit wait (ticks/s)", "PortXmitWait: ticks the port had data to send and no credit (congestion)"],
  ["Errors (total, +last sweep)", "SymbolErrorCounter, LinkDownedCounter, LinkErrorRecoveryCounter, PortRcvErrors, PortXmitDiscards"],
  ["", ""],
];

export class PortTable {
  switch: string | null = null;
  private rows = new Map<string, Row>();
  private selected: HTMLTableRowElement | null = null;
  private token = 0;

  constructor(private root: HTMLElement, private opts: PortTableOptions) {}

  /** Show ``name``'s ports (a tenant: only its own links'; none → a message, not an error). */
  async open(name: string): Promise<void> {
    const mine = ++this.token;
    this.switch = name;
    this.rows.clear();
    this.selected = null;
    this.root.hidden = false;
    this.root.dataset.switch = name;
    this.root.dataset.state = "loading";
    this.root.replaceChildren(this.head(name, "loading…"));
    let body: SwitchPorts;
    try {
      body = await api<SwitchPorts>(
        `/api/telemetry/fabrics/${this.opts.fabric}/switches/${encodeURIComponent(name)}/ports/`,
      );
    } catch (exc) {
      if (mine !== this.token) return;
      const missing = exc instanceof ApiError && exc.status === 404;
      const text = !missing
        ? `The ports of ${name} could not be loaded: ${exc instanceof Error ? exc.message : String(exc)}`
        : this.opts.operator
          ? `No switch ${name} on this fabric.`
          : `None of your reservations' links are on ${name}.`;
      this.root.dataset.state = "empty";
      this.root.replaceChildren(this.head(name, ""), h("p", { class: "muted", testid: "switch-empty" }, text));
      return;
    }
    if (mine !== this.token) return;
    this.render(body);
  }

  close(): void {
    this.token += 1;
    this.switch = null;
    this.rows.clear();
    this.root.hidden = true;
    this.root.replaceChildren();
    delete this.root.dataset.switch;
    this.opts.closed();
  }

  /** Rewrite the rows of links a delta carries; O(links in the delta). */
  update(states: LinkState[]): void {
    if (!this.rows.size) return;
    for (const st of states) {
      const row = this.rows.get(st.id);
      if (row) this.fill(row, st);
    }
  }

  private head(name: string, note: string): HTMLElement {
    const close = h("button", { type: "button", class: "close", testid: "switch-close", "aria-label": "Close the port table" }, "×");
    close.addEventListener("click", () => this.close());
    return h("header", { class: "switch-head" },
      h("h2", { testid: "switch-title" }, `Switch ${name}`), h("span", { class: "muted", testid: "switch-note" }, note), close);
  }

  private render(body: SwitchPorts): void {
    const cabled = body.ports.filter((p) => p.link !== null).length;
    const note = this.opts.operator
      ? `${body.tier} · ${body.model} · ${body.ports_total} ports, ${cabled} cabled`
      : `${body.tier} · ${body.ports.length} port${body.ports.length === 1 ? "" : "s"} of your reservations`;
    const tbody = h("tbody", {});
    for (const p of body.ports) tbody.append(this.row(body.switch, p));
    this.root.replaceChildren(
      this.head(body.switch, note),
      h("div", { class: "port-scroll" },
        h("table", { class: "grid ports", testid: "port-table" },
          h("thead", {}, h("tr", {}, ...PORT_COLUMNS.map(([c, help]) => h("th", help ? { title: help } : {}, c)))),
          tbody)),
    );
    this.root.dataset.state = "ready";
  }

  private row(name: string, p: SwitchPort): HTMLTableRowElement {
    const cell = (testid: string) => h("td", { testid });
    const state = cell("port-state");
    const tx = cell("port-tx");
    const rx = cell("port-rx");
    const util = cell("port-util");
    const wait = cell("port-xmit-wait");
    const errors = cell("port-errors");
    let peer: HTMLElement | string = "–";
    if (p.peer?.kind === "switch") {
      const go = h("button", { type: "button", class: "link", testid: "port-peer-switch" }, p.peer.name);
      go.addEventListener("click", (ev) => {
        ev.stopPropagation();
        this.opts.open(p.peer!.name);
      });
      peer = h("span", {}, go, ` port ${p.peer.port}`);
    } else if (p.peer) {
      peer = `${p.peer.name} port ${p.peer.port}`;
    }
    const el = h(
      "tr",
      { class: `port-row${p.link ? "" : " port-free"}`, testid: "port-row", "data-port": p.port, "data-link": p.link ?? undefined, "data-state": p.state },
      h("td", {}, String(p.port)),
      h("td", { testid: "port-peer" }, peer),
      state,
      h("td", { title: p.cable }, p.rate ? `${p.rate}${p.gbps ? ` ${p.gbps} Gb/s` : ""}` : "–"),
      tx,
      rx,
      util,
      wait,
      errors,
      h("td", {}),
    );
    const row: Row = { data: p, el, state, tx, rx, util, wait, errors };
    if (p.link) {
      const link = p.link;
      const title = `${name} port ${p.port}`;
      const more = h("button", { type: "button", class: "link", testid: "port-pick", title: `counters and history of ${link}` }, "history");
      el.lastElementChild!.append(more);
      el.addEventListener("click", () => {
        this.selected?.removeAttribute("aria-selected");
        el.setAttribute("aria-selected", "true");
        this.selected = el;
        this.opts.pick(link, title);
      });
      this.rows.set(link, row);
    }
    const live = p.link ? this.opts.live(p.link) : undefined;
    if (live) this.fill(row, live);
    else {
      set(state, p.state);
      set(tx, bps(p.tx_bps));
      set(rx, bps(p.rx_bps));
      set(util, p.util === null ? "–" : `${(p.util * 100).toFixed(1)} %`);
      set(wait, waitText(p.xmit_wait));
      set(errors, p.link ? errorText(p.errors, p.error_totals) : "–");
    }
    return el;
  }

  private fill(row: Row, st: LinkState): void {
    const [tx, rx] = row.data.measured_here ? [st.tx_bps, st.rx_bps] : [st.rx_bps, st.tx_bps];
    const state = st.up ? "Active" : "Down";
    if (row.el.dataset.state !== state) row.el.dataset.state = state;
    row.el.classList.toggle("port-down", !st.up);
    set(row.state, state);
    set(row.tx, bps(tx));
    set(row.rx, bps(rx));
    set(row.util, `${(st.util * 100).toFixed(1)} %`);
    set(row.wait, waitText(st.xmit_wait ?? 0));
    set(row.errors, errorText(st.errors ?? {}, st.error_totals ?? {}));
  }
}
