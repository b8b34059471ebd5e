// The canvas page of a saved revision: level of detail, inspector, edits with instant
// validation, undo/redo, save as revision, diff and exports.

import { api, ApiError } from "../api";
import { confirmAction } from "../confirm";
import { byTestId, debounce, fmt, h, maybeTestId } from "../dom";
import { FabricCanvas, type LabelSize, type Picked } from "./canvas";
import { renderDiffLegend } from "./diffview";
import { compress, describe, EditError, GraphEditor } from "./edits";
import { renderSummary } from "./metrics";
import { explain } from "./planner";
import type { CanvasEdge, CanvasNode, CanvasView, EdgeLink, GraphDoc, PageInit, Revision, RevisionDiff, ValidationResult } from "./types";

export function startCanvasPage(init: PageInit): void {
  const design = init.design!;
  const base = `/api/designs/${design.id}/revisions/${init.revision}`;
  const inspector = document.getElementById("inspector")!;
  const validation = byTestId("validation");
  const validationState = byTestId("validation-state");
  let level = "auto";
  let focus: string | null = null;
  let editor: GraphEditor | null = null;
  let armed: { device: string; port: number } | null = null;
  let loadSeq = 0;
  // A revision diff drawn on the canvas: the newer revision with what changed from the older one.
  let diffPair: { from: number; to: number } | null = null;
  const legend = h("div", { class: "diff-legend", testid: "diff-legend", role: "note", hidden: true });
  byTestId("canvas").after(legend);

  const canvas = new FabricCanvas(byTestId("canvas"), {
    pick: (item) => inspect(item),
    drill: (node) => {
      if (node.kind === "group") openGroup(node);
      else if (node.kind === "switch") void load("switch", node.id);
      else if (node.kind === "node-group" && typeof node.data.leaf === "string") void load("switch", node.data.leaf);
    },
  });

  /** A pod holding scalable units opens on its SU level, any other group on its switches. */
  function openGroup(node: CanvasNode): void {
    void load(node.data.sus ? "fabric" : "pod", node.id);
  }

  // ---- loading a level --------------------------------------------------------------------
  async function fetchView(lv: string, fc: string | null): Promise<CanvasView> {
    if (diffPair) {
      const query = new URLSearchParams({ level: lv, diff_from: String(diffPair.from) });
      if (fc) query.set("focus", fc);
      return api<CanvasView>(`/api/designs/${design.id}/revisions/${diffPair.to}/canvas/?${query}`);
    }
    if (editor && editor.editCount > 0) {
      return api<CanvasView>(init.canvas_url!, { method: "POST", body: JSON.stringify({ graph: editor.graph, level: lv, focus: fc }) });
    }
    const query = new URLSearchParams({ level: lv });
    if (fc) query.set("focus", fc);
    return api<CanvasView>(`${base}/canvas/?${query}`);
  }

  async function load(lv: string, fc: string | null, keepViewport = false): Promise<void> {
    const mine = ++loadSeq;
    document.body.dataset.canvas = "loading";
    try {
      const view = await fetchView(lv, fc);
      if (mine !== loadSeq) return;
      level = view.level;
      focus = view.focus;
      canvas.render(view, keepViewport);
      crumbs(view);
      portTable(view);
      if (diffPair) renderDiffLegend(legend, view, diffPair.from, diffPair.to, () => ((diffPair = null), void load(level, focus)));
      else renderDiffLegend(legend, null, 0, 0, () => undefined);
      document.body.dataset.diff = diffPair ? `${diffPair.from}-${diffPair.to}` : "";
      if (armed) canvas.arm(`port:${armed.device}:${armed.port}`);
      document.body.dataset.level = view.level;
      if (!document.body.dataset.readyMs) {
        // Time to interactive (benchmarked): the first frame with the canvas drawn and wired.
        await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        document.body.dataset.readyMs = String(Math.round(performance.now()));
      }
      document.body.dataset.canvas = "ready";
    } catch (err) {
      if (mine !== loadSeq) return;
      showError(err instanceof ApiError ? explain(err) : String(err));
      // The focus may have vanished with an edit (a removed switch): fall back to the overview.
      if (fc) return load("auto", null);
      document.body.dataset.canvas = "ready";
    }
  }

  function crumbs(view: CanvasView): void {
    const nav = byTestId("breadcrumbs");
    nav.replaceChildren(
      ...view.breadcrumbs.flatMap((c, i) => {
        const last = i === view.breadcrumbs.length - 1;
        const el = last
          ? h("span", { "aria-current": "location", testid: "crumb" }, c.label)
          : h("a", { href: "#", testid: "crumb" }, c.label);
        if (!last) el.addEventListener("click", (e) => (e.preventDefault(), void load(c.level, c.focus)));
        return i ? [h("span", { class: "sep" }, "›"), el] : [el];
      }),
      h("span", { class: "muted counts" }, ` · ${fmt(view.counts.switches)} switches · ${fmt(view.counts.nodes)} nodes · ${fmt(view.counts.links)} cables`),
    );
  }

  function portTable(view: CanvasView): void {
    const card = byTestId("port-table-card");
    card.hidden = view.level !== "switch" || !view.ports;
    if (card.hidden || !view.ports) return;
    const sw = view.focus!;
    byTestId("port-table-title").textContent = `Ports of ${sw}`;
    document.getElementById("port-table")!.replaceChildren(
      h("table", { class: "grid compact", testid: "port-table" },
        h("thead", {}, h("tr", {}, ...["Port", "Cage", "Peer", "Tier", "Cable", "Length (m)", ""].map((c) => h("th", {}, c)))),
        h("tbody", {}, ...view.ports.map((p) =>
          h("tr", { class: p.free ? "free" : undefined, testid: `port-${p.port}`, "data-free": p.free ? "true" : "false" },
            h("td", { class: "num" }, p.port), h("td", { class: "num" }, p.cage),
            h("td", {}, p.free ? "free" : `${p.peer}[${p.peer_port}]`), h("td", {}, p.tier),
            h("td", {}, p.free ? "" : editor ? cableSelect(p.cable, sw, p.port) : p.cable),
            h("td", { class: "num" }, p.length_m ?? ""),
            h("td", {}, !editor ? null : p.free
              ? button(armed ? "Connect here" : "Connect from", "port-connect", () => armPort(sw, p.port))
              : button("Disconnect", "disconnect", () => unplug(sw, p.port, `${p.peer}[${p.peer_port}]`), "danger")))))));
  }

  // ---- inspector --------------------------------------------------------------------------
  function row(label: string, value: unknown, testid?: string): HTMLElement[] {
    return [h("dt", {}, label), h("dd", { testid }, value === null || value === undefined || value === "" ? "–" : String(value))];
  }

  // Destructive edits ask first; Undo brings them back until a revision is saved.
  function confirmEdit(what: { title: string; message: string; action: string }, change: () => unknown): void {
    const undo = "Undo (Ctrl+Z) brings it back until you save a revision; saved revisions stay in the history.";
    void confirmAction({ ...what, undo }).then((ok) => {
      if (ok) edit(change);
    });
  }

  function unplug(device: string, port: number, peer: string): void {
    const message = `The cable from ${device}[${port}] to ${peer} is removed from this draft.`;
    confirmEdit({ title: `Disconnect ${device}[${port}]?`, message, action: "Disconnect" }, () => editor!.disconnect(device, port));
  }

  function button(label: string, testid: string, onClick: () => void, cls?: string): HTMLButtonElement {
    const b = h("button", { type: "button", testid, class: cls }, label);
    b.addEventListener("click", onClick);
    return b;
  }

  function cableSelect(current: string, device: string, port: number): HTMLElement | null {
    if (!editor) return null;
    const select = h("select", { testid: "cable-select", "aria-label": `Cable type of ${device}[${port}]` },
      ...init.catalogue.cables.map((c) => h("option", { value: c.name, selected: c.name === current }, c.name)));
    select.addEventListener("change", () => edit(() => editor!.setCable(device, port, select.value)));
    return select;
  }

  function linkRows(links: EdgeLink[]): HTMLElement {
    return h("table", { class: "grid compact", testid: "link-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "From"), h("th", {}, "To"), h("th", {}, "Cable"), h("th", {}, "Length (m)"), h("th", {}, ""))),
      h("tbody", {}, ...links.map(([a, ap, b, bp, cable, length]) =>
        h("tr", { testid: "link-row" }, h("td", {}, `${a}[${ap}]`), h("td", {}, `${b}[${bp}]`),
          h("td", {}, editor ? cableSelect(cable, a, ap) : cable), h("td", { class: "num" }, fmt(length)),
          h("td", {}, editor ? button("Disconnect", "disconnect", () => unplug(a, ap, `${b}[${bp}]`), "danger") : null)))));
  }

  function inspect(item: Picked): void {
    if (item.type === "none") {
      inspector.replaceChildren(h("p", { class: "muted" }, "Click a switch, port or cable."));
      return;
    }
    if (item.type === "edge") return inspectEdge(item.edge);
    const n = item.node;
    const d = n.data;
    const parts: (HTMLElement | null)[] = [h("h3", { testid: "inspected" }, n.label.split("\n")[0])];
    if (n.kind === "switch") {
      const free = editor ? editor.freePorts(n.id) : [];
      parts.push(h("dl", { class: "props" }, ...row("Model", d.model), ...row("Tier", n.tier), ...row("GUID", d.guid),
        ...row("Rack", d.rack ? `${d.rack} U${d.u}` : ""), ...row("Ports used", `${n.ports_used} / ${n.ports_total}`, "ports-used"),
        ...(editor ? row("Free ports", free.length ? compress(free) : "none", "free-ports") : [])));
      const actions = h("div", { class: "toolbar" }, button("Show ports", "open-switch", () => void load("switch", n.id)));
      if (editor) {
        if (free.length) actions.append(button("Connect from here", "connect-from", () => armPort(n.id, free[0])));
        actions.append(button("Remove switch", "remove-switch", () => confirmEdit({
          title: `Remove ${n.id}?`,
          message: `${n.id} and its ${n.ports_used} cabled ports leave this draft; the switches it connects lose those links.`,
          action: "Remove switch",
        }, () => editor!.removeSwitch(n.id)), "danger"));
      }
      parts.push(actions);
    } else if (n.kind === "port") {
      const sw = String(d.switch);
      const port = Number(d.port);
      parts[0] = h("h3", { testid: "inspected" }, `${sw} port ${port}`);
      parts.push(h("dl", { class: "props" }, ...row("Cage", d.cage), ...row("State", d.free ? "free" : "cabled", "port-state"),
        ...row("Peer", d.peer ? `${d.peer}[${d.peer_port}]` : ""), ...row("Tier", d.tier), ...row("Cable", d.cable), ...row("Length", d.length_m === null ? "" : `${d.length_m} m`)));
      if (editor && d.free) parts.push(h("div", { class: "toolbar" }, button("Connect from this port", "connect-from", () => armPort(sw, port))));
      if (editor && !d.free) {
        parts.push(h("div", { class: "toolbar" }, cableSelect(String(d.cable), sw, port), button("Disconnect", "disconnect", () => unplug(sw, port, `${String(d.peer)}[${String(d.peer_port)}]`), "danger")));
      }
    } else if (n.kind === "group") {
      parts.push(h("dl", { class: "props" }, ...row("Switches", d.switches), ...row("Hosts", d.hosts), ...row("Ports used", `${fmt(n.ports_used)} / ${fmt(n.ports_total)}`)),
        h("div", { class: "toolbar" }, button("Open", "open-group", () => openGroup(n))));
    } else {
      parts.push(h("dl", { class: "props" }, ...row("Hosts", d.hosts), ...row("First", d.first), ...row("Last", d.last), ...row("Links", n.ports_used)));
    }
    inspector.replaceChildren(...parts.filter((p): p is HTMLElement => p !== null));
  }

  function inspectEdge(e: CanvasEdge): void {
    const parts: HTMLElement[] = [
      h("h3", { testid: "inspected" }, `${e.source} – ${e.target}`),
      h("dl", { class: "props" }, ...row("Cables", e.count, "edge-count"), ...row("Tier", e.tier), ...row("Type", e.cable)),
    ];
    if (e.links?.length) parts.push(linkRows(e.links));
    if (e.links && e.count > e.links.length) parts.push(h("p", { class: "muted" }, `first ${e.links.length} of ${e.count}`));
    inspector.replaceChildren(...parts);
  }

  // ---- editing ----------------------------------------------------------------------------
  function showError(message: string): void {
    const el = maybeTestId("edit-error");
    if (el) el.textContent = message;
  }

  function edit(run: () => unknown): void {
    showError("");
    try {
      run();
    } catch (err) {
      if (err instanceof EditError) showError(err.message);
      else throw err;
    }
  }

  function armPort(device: string, port: number): void {
    const form = document.getElementById("connect-form") as HTMLFormElement;
    const field = (name: string) => form.elements.namedItem(name) as HTMLInputElement;
    if (!armed) {
      armed = { device, port };
      field("a").value = device;
      field("a_port").value = String(port);
      field("b").value = "";
      field("b_port").value = "";
      canvas.arm(`port:${device}:${port}`);
      if (canvas.view) portTable(canvas.view);
      showError("");
    } else {
      field("b").value = device;
      field("b_port").value = String(port);
      form.requestSubmit();
    }
  }

  const validate = debounce(async () => {
    if (!editor) return;
    validationState.textContent = "validating…";
    try {
      const result = await api<ValidationResult>("/api/designs/validate/", { method: "POST", body: JSON.stringify({ graph: editor.graph }) });
      renderSummary(validation, { ...result.summary, issues: result.issues });
      validationState.textContent = result.summary.errors.length ? "errors" : "ok";
    } catch (err) {
      validation.replaceChildren(h("p", { class: "error" }, err instanceof ApiError ? explain(err) : String(err)));
      validationState.textContent = "invalid";
    }
    validationState.dataset.state = validationState.textContent;
    validation.dataset.version = String(editor.editCount) + ":" + String(Date.now());
  }, 200);

  function changed(): void {
    if (!editor) return;
    byTestId<HTMLButtonElement>("undo").disabled = !editor.canUndo;
    byTestId<HTMLButtonElement>("redo").disabled = !editor.canRedo;
    byTestId<HTMLButtonElement>("save-revision").disabled = editor.editCount === 0;
    const last = editor.history[editor.history.length - 1];
    byTestId("edit-count").textContent = editor.editCount
      ? `${editor.editCount} edit${editor.editCount === 1 ? "" : "s"} · last: ${describe(last)}`
      : "no edits";
    const list = document.getElementById("device-list");
    list?.replaceChildren(...editor.graph.switches.map((s) => h("option", { value: s.name })));
    validationState.textContent = "validating…";
    validate();
    void load(level, focus, true);
  }

  async function startEditing(): Promise<void> {
    const graph = await api<GraphDoc>(`${base}/graph/`);
    editor = new GraphEditor(graph, init.catalogue, () => changed());
    document.getElementById("device-list")?.replaceChildren(...graph.switches.map((s) => h("option", { value: s.name })));
    byTestId("editor").dataset.ready = "true";

    byTestId("undo").addEventListener("click", () => editor!.undo());
    byTestId("redo").addEventListener("click", () => editor!.redo());
    document.addEventListener("keydown", (e) => {
      const target = e.target as HTMLElement;
      if (!(e.ctrlKey || e.metaKey) || ["INPUT", "SELECT", "TEXTAREA"].includes(target.tagName)) return;
      const key = e.key.toLowerCase();
      if (key === "z" && !e.shiftKey) (e.preventDefault(), editor!.undo());
      else if ((key === "z" && e.shiftKey) || key === "y") (e.preventDefault(), editor!.redo());
    });

    const addForm = document.getElementById("add-switch-form") as HTMLFormElement;
    addForm.addEventListener("submit", (e) => {
      e.preventDefault();
      const data = new FormData(addForm);
      edit(() => {
        editor!.addSwitch(String(data.get("name")), String(data.get("model")), String(data.get("tier")));
        addForm.reset();
      });
    });

    const connectForm = document.getElementById("connect-form") as HTMLFormElement;
    connectForm.addEventListener("submit", (e) => {
      e.preventDefault();
      const data = new FormData(connectForm);
      const text = (k: string) => String(data.get(k) ?? "").trim();
      edit(() => {
        try {
          editor!.connect(text("a"), Number(text("a_port")), text("b"), Number(text("b_port")), text("cable"));
          connectForm.reset();
        } finally {
          armed = null;
          canvas.arm(null);
        }
      });
    });

    const revisionForm = document.getElementById("revision-form") as HTMLFormElement;
    revisionForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      const message = String(new FormData(revisionForm).get("message") ?? "").trim();
      try {
        const saved = await api<Revision>(`/api/designs/${design.id}/revisions/`, {
          method: "POST",
          body: JSON.stringify({ graph: editor!.graph, message }),
        });
        window.location.assign(`/designer/${design.id}/r/${saved.number}/`);
      } catch (err) {
        showError(err instanceof ApiError ? explain(err) : String(err));
      }
    });
  }

  // Port clicks in the switch view arm a connection: first free port, then the second.
  canvas.cy.on("tap", 'node[kind = "port"][free = 1]', (ev) => {
    if (!editor || !armed) return;
    const node = canvas.node(ev.target.id() as string) as CanvasNode;
    armPort(String(node.data.switch), Number(node.data.port));
  });

  // ---- revision summary, diff, navigation -------------------------------------------------
  async function showSavedSummary(): Promise<void> {
    try {
      const rev = await api<Revision>(`${base}/`);
      renderSummary(validation, rev.summary);
      validationState.textContent = rev.summary.errors?.length ? "errors" : "saved";
    } catch (err) {
      validation.replaceChildren(h("p", { class: "error" }, String(err)));
    }
  }

  const findForm = document.getElementById("find-form") as HTMLFormElement;
  findForm.addEventListener("submit", (e) => {
    e.preventDefault();
    const name = String(new FormData(findForm).get("q") ?? "").trim();
    if (name) void load("switch", name);
  });

  byTestId<HTMLSelectElement>("revision-select").addEventListener("change", (e) => {
    window.location.assign((e.target as HTMLSelectElement).value);
  });

  byTestId("show-diff").addEventListener("click", async () => {
    const other = Number(byTestId<HTMLSelectElement>("diff-against").value);
    const target = byTestId("diff");
    if (!other) return target.replaceChildren(h("p", { class: "muted" }, "This design has one revision."));
    const [from, to] = other < init.revision! ? [other, init.revision!] : [init.revision!, other];
    try {
      const diff = await api<RevisionDiff>(`/api/designs/${design.id}/revisions/${from}/diff/${to}/`);
      renderDiff(target, diff, from, to);
      diffPair = { from, to };
      void load(level, focus);
    } catch (err) {
      target.replaceChildren(h("p", { class: "error" }, err instanceof ApiError ? explain(err) : String(err)));
    }
  });

  // For the browser tests and whoever debugs a canvas: every label's size on screen.
  (window as Window & { ibcCanvas?: unknown }).ibcCanvas = {
    labels: (): LabelSize[] => canvas.labelSizes(),
    zoom: (): number => canvas.cy.zoom(),
    colour: (id: string): string => String(canvas.cy.getElementById(id).style("background-color")),
    lineColour: (id: string): string => String(canvas.cy.getElementById(id).style("line-color")),
    extent: (): { w: number; h: number } => {
      const box = canvas.cy.elements().renderedBoundingBox({});
      return { w: box.w, h: box.h };
    },
    at: (id: string): { x: number; y: number } => canvas.cy.getElementById(id).renderedPosition(),
  };

  // The canvas first: the graph for editing and the saved summary load once it is on screen.
  void load("auto", null).then(() => {
    void showSavedSummary();
    if (init.editable) void startEditing();
  });
}

function describeItem(item: unknown): string {
  if (typeof item === "string") return item;
  const o = item as Record<string, unknown>;
  if ("a" in o && "b" in o) return `${o.a}[${o.a_port}] – ${o.b}[${o.b_port}]${o.cable ? ` (${o.cable})` : ""}`;
  if ("field" in o) return `${o.name ?? o.link}: ${o.field} ${String(o.old)} → ${String(o.new)}`;
  return JSON.stringify(o);
}

function renderDiff(target: HTMLElement, diff: RevisionDiff, from: number, to: number): void {
  const section = (title: string, key: string, side: { added: unknown[]; removed: unknown[]; changed?: unknown[] }) =>
    h("div", { class: "diff-block", testid: `diff-${key}` }, h("h4", {}, title),
      ...(["added", "removed", "changed"] as const).map((kind) => {
        const items = side[kind] ?? [];
        return h("div", { class: `diff-${kind}`, testid: `diff-${key}-${kind}` },
          h("span", { class: "muted" }, `${kind} (${items.length})`),
          items.length ? h("ul", {}, ...items.slice(0, 200).map((i) => h("li", {}, describeItem(i)))) : null);
      }));
  const empty = !diff.switches.added.length && !diff.switches.removed.length && !(diff.switches.changed ?? []).length &&
    !diff.cables.added.length && !diff.cables.removed.length && !(diff.cables.changed ?? []).length;
  target.replaceChildren(
    h("p", { testid: "diff-title" }, `r${from} → r${to}`, empty ? " · no differences" : ""),
    section("Switches", "switches", diff.switches),
    section("Cables", "cables", diff.cables),
  );
}
