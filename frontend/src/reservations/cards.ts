// Reservation cards: status, size, isolation (partition and service level), window, placement and connection
// details, with extend/release/cancel. The board polls the API every poll_ms for reservations
// still on their way (requested, queued, provisioning, ending, or placed and due) until they settle.
// A queued request shows its position and estimated start instead of a window and partition; a
// granted one on nodes that are off shows its power step ("powering on: 2 of 4 nodes booting,
// expected ready 14:07 UTC") until every node is on and the fabric verified its partition.

import { api, ApiError, postOnce } from "../api";
import { h } from "../dom";
import { confirmAction } from "../confirm";
import type { ConnectionNode, Reservation, Urls } from "./types";

const SETTLED = new Set(["ready", "rejected", "released", "cancelled", "preempted"]);
const CAN_CANCEL = new Set(["queued", "placed", "provisioning"]);
const CAN_RELEASE = new Set(["placed", "provisioning", "ready"]);
const CAN_EXTEND = new Set(["placed", "provisioning", "ready"]);

export interface BoardOptions {
  urls: Urls;
  pollMs: number;
  canWrite: boolean;
  // Member rights (scheduling/services/rights.py, enforced there): a tenant member changes only
  // the reservations they made; admins and operators any they see.
  role: string;
  userId: number | null;
  tenantNames: Map<number, string>;
  poolNames: Map<number, string>;
  linkTitles: boolean;
  onChange?: () => void;
}

export const urlFor = (template: string, id: number): string => template.replace("/0/", `/${id}/`);

export function when(iso: string | null): string {
  if (!iso) return "–";
  const d = new Date(iso);
  return `${d.toISOString().slice(0, 16).replace("T", " ")} UTC`;
}

function duration(start: string, end: string): string {
  const minutes = Math.round((new Date(end).getTime() - new Date(start).getTime()) / 60000);
  return minutes % 60 ? `${minutes} min` : `${minutes / 60} h`;
}

// Why it waits (over quota, no room until …, its place in the queue, its patience, the site it
// waits for) is its reason, which every queue pass keeps current: shown above as res-reason.
function queuedNote(r: Reservation): HTMLElement {
  const estimate = r.estimated_start ? `estimated start ${when(r.estimated_start)}` : "no estimated start yet";
  const patience = r.max_wait_minutes ? ` · waits up to ${r.max_wait_minutes} min for a packed placement` : "";
  return h(
    "p",
    { class: "muted small", testid: "res-queue" },
    `Queued: position ${r.queue_position ?? "?"} · ${estimate}${patience}. ` +
      "It is placed automatically when capacity frees.",
  );
}

function pending(r: Reservation): boolean {
  if (SETTLED.has(r.status)) return false;
  if (r.status === "placed") return new Date(r.start).getTime() <= Date.now();
  return true;
}

export class Board {
  private items = new Map<number, { data: Reservation; el: HTMLElement; key: string }>();
  private connections = new Map<number, ConnectionNode[]>();
  private timer: number | undefined;
  private empty: HTMLElement;

  constructor(private root: HTMLElement, private opts: BoardOptions) {
    this.empty = h("p", { class: "muted", testid: "reservations-empty" }, "No reservations yet.");
    root.replaceChildren(this.empty);
  }

  setConnection(id: number, nodes: ConnectionNode[]): void {
    if (nodes.length) this.connections.set(id, nodes);
  }

  show(list: Reservation[]): void {
    for (const r of list) this.upsert(r, false);
    this.schedule();
  }

  upsert(r: Reservation, first = true): void {
    const key = JSON.stringify(r);
    const current = this.items.get(r.id);
    if (current && current.key === key) return;
    const el = this.render(r);
    if (current) current.el.replaceWith(el);
    else if (first) this.root.prepend(el);
    else this.root.append(el);
    this.items.set(r.id, { data: r, el, key });
    this.empty.remove();
    if (r.placement?.nodes?.length && !this.connections.has(r.id)) void this.loadConnection(r.id);
    this.schedule();
  }

  private schedule(): void {
    const waiting = [...this.items.values()].some((i) => pending(i.data));
    if (waiting && this.timer === undefined) {
      this.timer = window.setInterval(() => void this.poll(), this.opts.pollMs);
    } else if (!waiting && this.timer !== undefined) {
      window.clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private async poll(): Promise<void> {
    const ids = [...this.items.values()].filter((i) => pending(i.data)).map((i) => i.data.id);
    let changed = false;
    for (const id of ids) {
      try {
        const fresh = await api<Reservation>(`${this.opts.urls.api}reservations/${id}/`);
        if (fresh.status !== this.items.get(id)?.data.status) changed = true;
        this.upsert(fresh);
      } catch {
        // a failed poll is retried on the next tick
      }
    }
    if (changed) this.opts.onChange?.();
    this.schedule();
  }

  private async loadConnection(id: number): Promise<void> {
    try {
      const body = await api<{ nodes: ConnectionNode[] }>(urlFor(this.opts.urls.connection, id));
      this.connections.set(id, body.nodes);
      const item = this.items.get(id);
      if (item) {
        const el = this.render(item.data);
        item.el.replaceWith(el);
        item.el = el;
      }
    } catch {
      // connection details are shown once they load; the card is useful without them
    }
  }

  private render(r: Reservation): HTMLElement {
    const p = r.placement ?? {};
    const nodes = p.nodes ?? [];
    const title = r.name || r.partition;
    const detailUrl = urlFor(this.opts.urls.detail, r.id);
    const tenant = this.opts.tenantNames.get(r.tenant);
    const size = r.gpus || r.requested_gpus || (r.requested_nodes ? `${r.requested_nodes} nodes` : "?");
    const card = h(
      "article",
      { class: `res-card res-${r.status}`, testid: "reservation", "data-id": r.id, "data-status": r.status },
      h(
        "header",
        {},
        this.opts.linkTitles ? h("a", { href: detailUrl, testid: "res-link" }, title) : h("strong", {}, title),
        " ",
        h("span", { class: `status status-${r.status}`, testid: "res-status" }, r.status),
        tenant ? h("span", { class: "muted" }, ` · ${tenant}`) : null,
        h("span", { class: "muted" }, ` · ${this.opts.poolNames.get(r.pool) ?? `pool ${r.pool}`} · ${r.partition}`),
      ),
      h(
        "dl",
        { class: "res-facts" },
        h("dt", {}, "GPUs"), h("dd", { testid: "res-gpus" }, String(size)),
        h("dt", {}, "Nodes"), h("dd", { testid: "res-node-count" }, String(nodes.length || "–")),
        // In words: the partition that isolates it and the service level its traffic gets (the
        // variables a job needs are on "How to use it").
        h("dt", {}, "Isolation"),
        h("dd", { title: "InfiniBand partition (P_Key) and service level (SL)" },
          "partition ", h("code", { testid: "res-pkey" }, r.pkey_hex ?? "–"),
          ", service level ", h("span", { testid: "res-sl" }, String(r.sl))),
        h("dt", {}, "Priority"), h("dd", {}, r.priority_class + (r.borrowed ? " (borrowed)" : "")),
        ...(r.status === "queued"
          ? [h("dt", {}, "Duration"), h("dd", { testid: "res-window" }, duration(r.start, r.end))]
          : [h("dt", {}, "Window"), h("dd", { testid: "res-window" }, `${when(r.start)} → ${when(r.end)}`)]),
      ),
      p.leaf_groups?.length
        ? h("p", { class: "muted small", testid: "res-placement" },
            `leaf groups ${p.leaf_groups.join(", ")} · leaves ${p.leaves?.length ?? 0}` +
            (p.max_switch_hops ? ` · at most ${p.max_switch_hops} switch hops between nodes` : "") +
            (p.rail_aligned ? " · rail-aligned" : "") +
            (p.sharp?.length ? ` · SHARP tree on ${p.sharp.length} switches` : ""))
        : null,
      r.reason ? h("p", { class: r.status === "rejected" ? "error" : "muted", testid: "res-reason" }, r.reason) : null,
      r.fabric_error ? h("p", { class: "error", testid: "res-fabric-error" }, r.fabric_error) : null,
      r.progress
        ? h(
            "p",
            { class: `muted small step step-${r.progress.step}`, testid: "res-step", "data-step": r.progress.step },
            r.progress.step === "fabric"
              ? "Waiting for the fabric to verify the partition on its ports…"
              : `${r.progress.message[0].toUpperCase()}${r.progress.message.slice(1)}.`,
          )
        : r.status === "provisioning"
          ? h("p", { class: "muted small" }, "Waiting for the fabric to verify the partition on its ports…")
          : null,
      r.status === "queued" ? queuedNote(r) : null,
      this.connectionTable(r.id, nodes),
      this.actions(r),
    );
    return card;
  }

  private connectionTable(id: number, names: string[]): HTMLElement | null {
    const nodes = this.connections.get(id);
    if (!names.length) return null;
    const use = h("a", { href: urlFor(this.opts.urls.use, id), testid: "res-use-link" }, "How to use it");
    if (!nodes) return h("p", { class: "muted small" }, `Nodes: ${names.join(", ")} · `, use);
    const rows = nodes.map((n) =>
      h(
        "tr",
        { testid: "conn-node", "data-node": n.node },
        h("td", {}, n.node),
        h("td", {}, n.gpus.join(",")),
        h("td", {}, ...n.hcas.map((p) => h("code", { class: "guid", title: `rail ${p.rail}, ${p.leaf} port ${p.leaf_port ?? "?"}` }, p.port_guid))),
      ),
    );
    const details = h(
      "details",
      { class: "res-connection", testid: "res-connection" },
      h("summary", {}, `Nodes and HCA ports: ${nodes.length} nodes, ${nodes.reduce((a, n) => a + n.hcas.length, 0)} HCA ports`),
      h("table", { class: "grid" },
        h("thead", {}, h("tr", {}, h("th", {}, "Node"), h("th", {}, "GPUs"), h("th", {}, "HCA port GUIDs"))),
        h("tbody", {}, ...rows)),
    );
    // The link stays outside <summary>: a control nested in another is not reachable by keyboard.
    return h("div", {}, details, h("p", { class: "small" }, use));
  }

  private actions(r: Reservation): HTMLElement | null {
    if (!this.opts.canWrite) return null;
    if (this.opts.role === "tenant-member" && r.created_by !== this.opts.userId) {
      return CAN_CANCEL.has(r.status) || CAN_RELEASE.has(r.status)
        ? h("p", { class: "muted small", testid: "res-not-yours" },
            "Made by another member: only they or a tenant admin can extend, release or cancel it.")
        : null;
    }
    const error = h("span", { class: "error", testid: "res-action-error", role: "alert" });
    const bar = h("div", { class: "actions" });
    const run = async (verb: string, body?: unknown) => {
      error.textContent = "";
      // One request at a time: a double click must not extend twice from the same end.
      const buttons = [...bar.querySelectorAll("button")];
      for (const b of buttons) b.disabled = true;
      try {
        const fresh = await postOnce<Reservation>(`${this.opts.urls.api}reservations/${r.id}/${verb}/`, body);
        this.upsert(fresh);
        this.opts.onChange?.();
      } catch (exc) {
        error.textContent = exc instanceof ApiError ? exc.body.detail : String(exc);
      } finally {
        for (const b of buttons) b.disabled = false;
      }
    };
    if (CAN_EXTEND.has(r.status)) {
      const hours = h("input", { type: "number", min: "0.25", step: "0.25", value: "1", size: 4, "aria-label": "extend by hours", testid: "res-extend-hours" });
      const button = h("button", { type: "button", testid: "res-extend" }, "Extend");
      button.addEventListener("click", () => {
        const end = new Date(new Date(r.end).getTime() + Number(hours.value) * 3_600_000);
        void run("extend", { end: end.toISOString() });
      });
      bar.append(h("span", { class: "extend" }, "+", hours, " h ", button));
    }
    if (CAN_RELEASE.has(r.status)) {
      const button = h("button", { type: "button", class: "danger", testid: "res-release" }, "Release");
      button.addEventListener("click", () => void confirmAction({
        title: `Release ${r.name}?`,
        message: `Its ${r.gpus} GPUs are freed now and its partition is removed from the fabric: its jobs lose the network.`,
        undo: "A released reservation cannot come back: to use these GPUs again you reserve again, and they may be taken by then.",
        action: "Release",
      }).then((ok) => (ok ? run("release") : undefined)));
      bar.append(button);
    }
    if (CAN_CANCEL.has(r.status)) {
      const button = h("button", { type: "button", class: "danger", testid: "res-cancel" }, "Cancel");
      button.addEventListener("click", () => void confirmAction({
        title: `Cancel ${r.name}?`,
        message: `The request for ${r.gpus} GPUs is withdrawn: nothing is provisioned and its place is given up.`,
        undo: "A cancelled reservation cannot come back: you would reserve again.",
        action: "Cancel reservation",
      }).then((ok) => (ok ? run("cancel") : undefined)));
      bar.append(button);
    }
    if (!bar.childElementCount) return null;
    bar.append(error);
    return bar;
  }
}
