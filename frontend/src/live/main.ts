// The live topology page: the designer's server-positioned canvas, links coloured from the
// live stream, events, link detail with a sparkline and history, change-request progress, and
// the switch level of detail: a clicked or zoomed-into switch's port table, updated from the
// same stream.

import "../designer/designer.css";
import "./live.css";
import { api } from "../api";
import { FabricCanvas, type Picked } from "../designer/canvas";
import type { CanvasEdge, CanvasNode } from "../designer/types";
import { byTestId, fmt, h } from "../dom";
import { PortTable } from "./ports";
import { LiveStream } from "./stream";
import type { ChangePage, ChangeStep, FabricEvent, FabricEventPage, LinkState, LiveEvent, LiveInit, Message, Snapshot, TenantSlice } from "./types";
import { ZoomToSwitch } from "./zoom";
import { BUCKET_COLOURS, BUSY_AT, BUSY_WORD, type Bundle, bundleOf, bundleText, legend, pct } from "./bundle";
import { timeChart } from "./chart";
import { PowerMarks, powerLegend } from "./power";

/** What an edge shows, as last written to Cytoscape (only differences are written again). */
interface EdgeLook {
  bucket: number;
  down: boolean;
  off: boolean; // every down link's node is off on purpose
  errors: number;
  mine: boolean;
  dim: boolean;
}

class LivePage {
  private canvas: FabricCanvas;
  private links = new Map<string, LinkState>();
  private edgeOfLink = new Map<string, string>();
  /** link id → both ends and the cable: "spine-01/1 ↔ su01-leaf-r1/33 (NDR-AOC, 10 m)" */
  private nameOfLink = new Map<string, string>();
  private linksOfEdge = new Map<string, string[]>();
  private edgeLook = new Map<string, EdgeLook>();
  private tierOfEdge = new Map<string, string>();
  private mine = new Set<string>();
  private highlight: Set<string> | null = null;
  private events = new Map<number, LiveEvent>();
  private selected: string | null = null;
  private spark: [number, number][] = [];
  private sparkTimer: number | undefined;
  private changes = new Map<number, WebSocket>();
  private snapshot: Snapshot | null = null;
  lastApplyMs = 0;
  stream: LiveStream;
  ports: PortTable;
  power: PowerMarks;

  constructor(private init: LiveInit) {
    this.canvas = new FabricCanvas(byTestId("live-canvas"), {
      pick: (item: Picked) => this.pick(item),
      drill: (node: CanvasNode) => this.drill(node),
    });
    this.ports = new PortTable(byTestId("switch-panel"), {
      fabric: init.fabric,
      operator: init.operator,
      live: (id) => this.links.get(id),
      pick: (id, title) => this.linkPanel(title, [id]),
      open: (name) => this.openSwitch(name),
      closed: () => {
        this.canvas.cy.elements(":selected").unselect();
        this.keepSwitch(null);
      },
    });
    this.canvas.render(init.canvas);
    // The bundle rule's figures where the pointer is: "mean 34 %, hottest 92 % on leaf03 p17".
    this.canvas.cy.on("mouseover", "edge", (ev) => {
      const id = (ev.target as { id(): string }).id();
      byTestId("live-canvas").title = `${id.replace("--", " — ")}: ${this.bundleText(id)}`;
    });
    this.canvas.cy.on("mouseout", "edge", () => byTestId("live-canvas").removeAttribute("title"));
    // A host box: which of its nodes are not on, since when.
    this.canvas.cy.on("mouseover", 'node[kind = "node-group"]', (ev) => {
      byTestId("live-canvas").title = this.power.boxTitle((ev.target as { id(): string }).id());
    });
    this.canvas.cy.on("mouseout", "node", () => byTestId("live-canvas").removeAttribute("title"));
    new ZoomToSwitch(this.canvas.cy, (name) => this.openSwitch(name));
    this.indexEdges(init.canvas.edges);
    this.power = new PowerMarks(this.canvas.cy, init.canvas.edges, init.operator);
    this.canvas.cy
      .style()
      .selector("edge.live-down")
      .style({ "line-color": "#c62828", "line-style": "dashed", width: 3, opacity: 1 })
      .selector("edge.live-err")
      .style({ label: "data(badge)", color: "#c62828", "font-size": 10, "text-background-color": "#fff", "text-background-opacity": 1 })
      .selector("edge.live-dim")
      .style({ opacity: 0.15 })
      .selector("edge.live-mine")
      .style({ opacity: 1, width: 4 })
      .update();
    for (let b = 1; b < BUCKET_COLOURS.length; b++) {
      this.canvas.cy.style().selector(`edge[bucket = ${b}]`).style({ "line-color": BUCKET_COLOURS[b], opacity: 1 }).update();
    }
    this.legend();
    this.stream = new LiveStream(init.ws, {
      message: (m) => this.onMessage(m),
      resync: () => this.resync(),
      status: (t) => (byTestId("live-conn").textContent = t),
    });
    this.stream.open(); // subscribing loads the snapshot and the events
    if (init.operator) void this.loadChanges();
    if (init.switch) this.openSwitch(init.switch);
  }

  /** The switch level: its port table (the URL keeps it, so a reload or a link reopens it). */
  openSwitch(name: string): void {
    if (this.canvas.node(name)) this.canvas.select(name);
    void this.ports.open(name);
    this.keepSwitch(name);
  }

  private keepSwitch(name: string | null): void {
    const url = new URL(location.href);
    if (url.searchParams.get("level") === "switch") {
      url.searchParams.delete("level"); // ?level=switch&focus=<name> would win over ?switch=
      url.searchParams.delete("focus");
    }
    if (name) url.searchParams.set("switch", name);
    else url.searchParams.delete("switch");
    history.replaceState(null, "", url);
  }

  private drill(node: CanvasNode): void {
    if (node.kind === "switch") this.openSwitch(node.id);
    else if (node.kind === "group" && this.canvas.view?.level === "fabric") {
      const url = new URL(location.href);
      url.searchParams.set("level", "pod");
      url.searchParams.set("focus", node.id);
      url.searchParams.delete("switch");
      location.assign(url);
    }
  }

  private indexEdges(edges: CanvasEdge[]): void {
    for (const e of edges) {
      const ids: string[] = [];
      for (const lk of e.links ?? []) {
        const id = `${lk[2]}/${lk[3]}`;
        this.edgeOfLink.set(id, e.id);
        const cable = [lk[4], lk[5] ? `${lk[5]} m` : ""].filter(Boolean).join(", ");
        this.nameOfLink.set(id, `${id} ↔ ${lk[0]}/${lk[1]}${cable ? ` (${cable})` : ""}`);
        ids.push(id);
      }
      this.linksOfEdge.set(e.id, ids);
      this.tierOfEdge.set(e.id, e.tier);
    }
  }

  private legend(): void {
    byTestId("live-legend").replaceChildren(...legend(this.init.operator), powerLegend());
  }

  /** The bundle rule's figures of a canvas edge (visible links only, for a tenant). */
  bundleText(edgeId: string): string {
    const ids = (this.linksOfEdge.get(edgeId) ?? []).filter((id) => this.init.operator || this.mine.has(id));
    return bundleText(bundleOf(ids, this.links, () => false));
  }

  /** The state to continue the stream from: the links' snapshot, and the events (event messages
   * older than the snapshot's seq are dropped by the stream, the list holds them). */
  private async resync(): Promise<number> {
    const [snap] = await Promise.all([
      api<Snapshot>(`/api/telemetry/fabrics/${this.init.fabric}/snapshot/`),
      this.loadEvents(),
    ]);
    this.snapshot = snap;
    this.links.clear();
    if (!this.init.operator) this.mine = new Set(snap.links.map((l) => l.id));
    this.power.reset(snap.power ?? {});
    this.apply(snap.links, true);
    this.filters();
    return snap.seq;
  }

  /** The header's counts, from the links as they are now (every delta and power change updates
   * them); links down because their node was powered off on purpose are not counted as down. */
  private summary(): void {
    let up = 0, down = 0, off = 0, busy = 0, congested = 0;
    for (const st of this.links.values()) {
      if (!st.up) {
        if (this.power.intendedOff(st.id)) off += 1;
        else down += 1;
        continue;
      }
      up += 1;
      if (st.util >= BUSY_AT) busy += 1;
      if ((st.xmit_wait ?? 0) > 0) congested += 1;
    }
    const offText = off ? ` · ${fmt(off)} off on purpose` : "";
    const collector = `collector ${this.snapshot?.collector ?? ""}`;
    byTestId("live-summary").textContent = this.init.operator
      ? `${fmt(up)} links up · ${fmt(down)} down${offText} · ${fmt(busy)} ${BUSY_WORD} · ${fmt(congested)} congested · ${collector}`
      : `${fmt(this.links.size)} links of your reservations · ${fmt(down)} down${offText} · ${collector}`;
  }

  /** Apply link states; returns main-thread milliseconds spent (kept for the benchmark). */
  apply(states: LinkState[], full = false): number {
    const t0 = performance.now();
    const touched = new Set<string>();
    for (const st of states) {
      this.links.set(st.id, st);
      const edge = this.edgeOfLink.get(st.id);
      if (edge) touched.add(edge);
    }
    const edges = full ? [...this.linksOfEdge.keys()] : [...touched];
    const cy = this.canvas.cy;
    const tier = this.tierFilter();
    cy.batch(() => {
      for (const edgeId of edges) {
        const agg = this.aggregate(edgeId);
        // A link whose node was powered off on purpose is down on purpose: not a failure.
        const offDown = (this.linksOfEdge.get(edgeId) ?? []).filter((id) => this.links.get(id)?.up === false && this.power.intendedOff(id)).length;
        const look: EdgeLook = {
          bucket: agg.bucket, down: agg.down - offDown > 0, off: offDown > 0 && agg.down === offDown, errors: agg.errors,
          mine: agg.mine, dim: this.dimmed(edgeId, agg, tier),
        };
        const was = full ? undefined : this.edgeLook.get(edgeId);
        if (was && was.bucket === look.bucket && was.down === look.down && was.off === look.off && was.errors === look.errors
            && was.mine === look.mine && was.dim === look.dim) continue;
        this.edgeLook.set(edgeId, look);
        // Every Cytoscape write restyles the edge: write only what changed.
        const el = cy.getElementById(edgeId);
        if (!was || was.bucket !== look.bucket) el.data("bucket", look.bucket);
        if (!was || was.down !== look.down) el.toggleClass("live-down", look.down);
        if (!was || was.off !== look.off) el.toggleClass("live-off", look.off);
        if (!was || was.errors !== look.errors) {
          el.toggleClass("live-err", look.errors > 0);
          el.data("badge", look.errors > 0 ? `⚠ ${look.errors}` : "");
        }
        if (!was || was.mine !== look.mine) el.toggleClass("live-mine", look.mine);
        if (!was || was.dim !== look.dim) el.toggleClass("live-dim", look.dim);
      }
    });
    this.downList();
    this.summary();
    this.ports.update(states);
    if (this.selected && states.some((st) => st.id === this.selected)) this.showLink(this.selected);
    this.lastApplyMs = performance.now() - t0;
    return this.lastApplyMs;
  }

  /** The edge's bundle: coloured by the mean utilisation of its links (see ./bundle.ts). */
  private aggregate(edgeId: string): Bundle {
    return bundleOf(this.linksOfEdge.get(edgeId) ?? [], this.links, (id) => this.mine.has(id) || !!this.highlight?.has(id));
  }

  private tierFilter(): string {
    return document.querySelector<HTMLSelectElement>('[data-testid="filter-tier"]')?.value ?? "";
  }

  private dimmed(edgeId: string, agg: Bundle, tier: string): boolean {
    if (tier && this.tierOfEdge.get(edgeId) !== tier) return true;
    if (!this.init.operator || this.highlight) return !agg.mine;
    return false;
  }

  private downList(): void {
    // Failures first; links down on purpose (their node powered off) after them, muted.
    const intended = (id: string) => (this.power.intendedOff(id) ? 1 : 0);
    const down = [...this.links.values()].filter((l) => !l.up).map((l) => l.id)
      .sort((a, b) => intended(a) - intended(b) || a.localeCompare(b));
    byTestId("down-links").replaceChildren(
      ...down.map((id) => {
        const note = this.power.linkNote(id);
        return h("li", { "data-link": id, testid: "down-link", "data-intended": intended(id) ? "yes" : "no", class: intended(id) ? "down-intended" : undefined },
          this.nameOfLink.get(id) ?? id, note ? h("span", { class: "muted down-note" }, ` — ${note}`) : null);
      }),
    );
  }

  private filters(): void {
    const box = byTestId("live-filters");
    if (box.childElementCount) return;
    const tiers = [...new Set(this.tierOfEdge.values())].sort();
    const tier = h("select", { testid: "filter-tier", "aria-label": "Tier" }, h("option", { value: "" }, "all tiers"),
      ...tiers.map((t) => h("option", { value: t }, t)));
    tier.addEventListener("change", () => this.apply([], true));
    box.append(tier);
    const groups: Record<string, TenantSlice> = this.init.operator
      ? this.snapshot?.tenants ?? {}
      : { mine: { links: [...this.mine], reservations: this.snapshot?.reservations ?? {} } };
    const res = h("select", { testid: "filter-reservation", "aria-label": "Reservation" }, h("option", { value: "" }, this.init.operator ? "all tenants" : "all my reservations"));
    const resNames = (slice: TenantSlice | undefined): Record<string, string> =>
      (this.init.operator ? slice?.reservation_names : this.snapshot?.reservation_names) ?? {};
    const sorted = Object.entries(groups).sort(([, a], [, b]) => (a.name ?? "").localeCompare(b.name ?? ""));
    for (const [tid, slice] of sorted) {
      const names = resNames(slice);
      // Names, never database ids: a tenant's own reservations, an operator's tenants too.
      const parent = this.init.operator ? h("optgroup", { label: slice.name || "tenant" }) : res;
      if (this.init.operator) parent.append(h("option", { value: `t:${tid}` }, `all of ${slice.name || "tenant"}`));
      for (const rid of Object.keys(slice.reservations).sort((a, b) => (names[a] ?? "").localeCompare(names[b] ?? ""))) {
        parent.append(h("option", { value: `r:${tid}:${rid}` }, names[rid] ?? `res-${rid}`));
      }
      if (parent !== res) res.append(parent);
    }
    res.addEventListener("change", () => {
      const v = res.value;
      this.highlight = null;
      if (v.startsWith("t:")) this.highlight = new Set(groups[v.slice(2)]?.links ?? []);
      if (v.startsWith("r:")) {
        const [, tid, rid] = v.split(":");
        void api<{ links: Record<string, unknown> }>(
          `/api/telemetry/fabrics/${this.init.fabric}/history/?reservation=${rid}&minutes=1`,
        ).then((body) => {
          this.highlight = new Set(Object.keys(body.links).length ? Object.keys(body.links) : groups[tid]?.links ?? []);
          this.apply([], true);
        });
      }
      this.apply([], true);
    });
    box.append(res);
    // The filters push the canvas down: Cytoscape caches where its container is, and would map
    // every click to the point above the one clicked until the window is resized.
    this.canvas.cy.resize();
  }

  private onMessage(msg: Message): void {
    if (msg.type === "link.delta") {
      if (msg.fabric === this.init.fabric) this.apply(msg.links);
    } else if (msg.type === "event") {
      if (msg.fabric === this.init.fabric) this.upsertEvent(msg.event);
    } else if (msg.type === "node.power") {
      if (msg.fabric !== this.init.fabric) return;
      const links = this.power.update(msg.node, msg);
      this.apply(links.flatMap((id) => this.links.get(id) ?? []));
    }
  }

  private async loadEvents(): Promise<void> {
    const body = await api<FabricEventPage>(`/api/telemetry/events/?fabric=${this.init.fabric}&page_size=50`);
    for (const ev of body.results.reverse()) this.upsertEvent(ev);
  }

  private upsertEvent(ev: LiveEvent): void {
    this.events.set(ev.id, ev);
    const list = [...this.events.values()].sort((a, b) => b.id - a.id).slice(0, 50);
    byTestId("events").replaceChildren(
      ...list.map((e) => {
        const li = h("li", { class: `ev ev-${e.severity} ev-${e.status}`, testid: "event", "data-kind": e.kind, "data-subject": e.subject, "data-status": e.status },
          h("strong", {}, e.kind.replace("_", " ")), " ", e.message, " ", h("span", { class: "badge" }, e.status),
          e.reservations.length ? h("span", { class: "muted" }, ` · ${e.reservations.map((r) => this.reservationName(r)).join(", ")}`) : null);
        if (this.init.can_write && e.status !== "resolved") {
          for (const verb of e.status === "open" ? ["acknowledge", "resolve"] : ["resolve"]) {
            const b = h("button", { class: "link", type: "button" }, verb);
            b.addEventListener("click", () => void api<FabricEvent>(`/api/telemetry/events/${e.id}/${verb}/`, { method: "POST" }).then((r) => this.upsertEvent(r)));
            li.append(" ", b);
          }
        }
        return li;
      }),
    );
  }

  /** A reservation's name as the snapshot gives it (a tenant: its own only). */
  private reservationName(id: number): string {
    const key = String(id);
    const own = this.snapshot?.reservation_names?.[key];
    if (own) return own;
    for (const slice of Object.values(this.snapshot?.tenants ?? {})) {
      const name = slice.reservation_names?.[key];
      if (name) return name;
    }
    return `res-${id}`;
  }

  private pick(item: Picked): void {
    if (item.type === "node") {
      const node = item.node;
      // A switch opens its port table; hosts collapsed behind a leaf open the leaf's.
      if (node.kind === "switch") this.openSwitch(node.id);
      else if (node.kind === "node-group" && typeof node.data.leaf === "string") this.openSwitch(node.data.leaf);
      return;
    }
    if (item.type !== "edge") return;
    const ids = this.linksOfEdge.get(item.edge.id) ?? [];
    const visible = ids.filter((id) => this.init.operator || this.mine.has(id));
    this.linkPanel(`${item.edge.source} — ${item.edge.target}`, visible, bundleText(bundleOf(visible, this.links, () => false)));
  }

  private linkPanel(title: string, ids: string[], summary?: string): void {
    const panel = byTestId("link-panel");
    panel.replaceChildren(h("h2", {}, title),
      h("p", { class: "muted", testid: "bundle-summary", hidden: !(summary && ids.length > 1) }, summary ?? ""),
      h("ul", { class: "plain" }, ...ids.map((id) => {
        const st = this.links.get(id);
        const b = h("button", { class: "link", type: "button", testid: "pick-link" }, id);
        b.addEventListener("click", () => this.select(id));
        return h("li", {}, b, " ", st ? (st.up ? pct(st.util) : "down") : "–");
      })),
      h("div", { testid: "link-detail" }));
    if (ids.length === 1) this.select(ids[0]);
  }

  private select(id: string): void {
    this.selected = id;
    this.spark = [];
    window.clearInterval(this.sparkTimer);
    const poll = () => void api<{ link: LinkState; history: number[][] }>(
      `/api/telemetry/fabrics/${this.init.fabric}/links/${id}/?minutes=60`,
    ).then((body) => {
      if (body.link.tx_bps !== undefined) this.links.set(id, body.link);
      this.spark.push([Date.now(), 100 * (body.link.util ?? 0)]);
      this.spark = this.spark.slice(-60);
      this.showLink(id, body.history);
    }).catch(() => window.clearInterval(this.sparkTimer));
    poll();
    this.sparkTimer = window.setInterval(poll, 1000);
  }

  private showLink(id: string, history?: number[][]): void {
    const el = document.querySelector<HTMLElement>('[data-testid="link-detail"]');
    if (!el) return;
    const st = this.links.get(id);
    const rows: [string, string][] = st
      ? [["state", st.up ? "Active" : "Down"], ["tx", gbps(st.tx_bps)], ["rx", gbps(st.rx_bps)],
         ["utilisation", `${(st.util * 100).toFixed(1)} %`],
         ["xmit wait", `${fmt(st.xmit_wait ?? 0)} ticks/s`],
         ...Object.entries(st.error_totals).map(([k, v]) => [k, `${fmt(v)} (total)`] as [string, string])]
      : [["state", "no data"]];
    const keep = el.querySelector(".history-block");
    el.replaceChildren(h("h3", {}, id), h("table", { class: "grid" }, ...rows.map(([k, v]) => h("tr", {}, h("th", {}, k), h("td", {}, v)))),
      h("div", { class: "muted" }, "utilisation, last minute (% of line rate)"),
      timeChart(this.spark, { unit: "%", yMax: 100, cls: "spark", label: `utilisation of ${id}, last minute` }));
    if (history) {
      // (kept, caption and all, when the stream redraws the panel without a new history)
      el.append(h("div", { class: "history-block" }, h("div", { class: "muted" }, "throughput, last hour (Gb/s, busier direction)"),
        timeChart(history.map((r) => [r[0] * 1000, Math.max(r[1], r[2]) / 1e9]), { unit: "Gb/s", cls: "history", label: `throughput of ${id}, last hour` })));
    }
    else if (keep) el.append(keep);
  }

  private async loadChanges(): Promise<void> {
    const body = await api<ChangePage>(
      `/api/fabrics/${this.init.fabric}/changes/?page_size=5`,
    ).catch(() => ({ results: [] }));
    for (const c of body.results) this.watchChange(c.id);
  }

  private watchChange(id: number): void {
    if (this.changes.has(id)) return;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}/ws/live/change/${id}/`);
    this.changes.set(id, ws);
    ws.onmessage = (ev: MessageEvent<string>) => {
      const msg = JSON.parse(ev.data) as Message;
      if (msg.type === "change.progress") this.progress(msg.change, msg.status, msg.steps);
    };
  }

  private progress(id: number, status: string, steps: ChangeStep[]): void {
    const box = byTestId("changes");
    let row = box.querySelector<HTMLElement>(`[data-change="${id}"]`);
    if (!row) {
      box.querySelector('[data-testid="changes-empty"]')?.remove();
      row = h("div", { class: "change", "data-change": id, testid: "change" });
      box.prepend(row);
    }
    const done = steps.filter((s) => s.status === "ok" || s.status === "skipped").length;
    const pct = steps.length ? Math.round((100 * done) / steps.length) : 0;
    const link = h("a", { href: `/fabrics/${this.init.fabric}/changes/${id}/`, testid: "change-link" }, `change ${id}`);
    row.replaceChildren(h("div", {}, link, ` · ${status} · ${steps.at(-1)?.name ?? ""}`),
      h("progress", { max: 100, value: ["applied", "unchanged", "previewed"].includes(status) ? 100 : pct, "data-status": status }));
  }
}

function gbps(bps: number): string {
  return `${(bps / 1e9).toFixed(2)} Gb/s`;
}

declare global {
  interface Window {
    __live?: LivePage;
  }
}

function start(): void {
  const el = document.getElementById("live-init");
  if (!el?.textContent) return;
  window.__live = new LivePage(JSON.parse(el.textContent) as LiveInit);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
