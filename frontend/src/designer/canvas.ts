// The Cytoscape.js canvas: draws a server-computed CanvasView with its preset positions.
// Nothing is laid out in the browser; a level change or an edit swaps the elements.
// Labels are never drawn under MIN_LABEL_PX on screen (Cytoscape's min-zoomed-font-size); the
// server picks the default level so they are readable once fitted, and when a level cannot be
// fitted with readable labels the canvas zooms to the smallest readable size instead of fitting.
// The font sizes match designer/canvas/elements.py FONT.

import cytoscape from "cytoscape";
import type { Core, ElementDefinition, EventObject, StylesheetJson } from "cytoscape";
import type { CanvasEdge, CanvasNode, CanvasView } from "./types";

export type Picked =
  | { type: "node"; node: CanvasNode }
  | { type: "edge"; edge: CanvasEdge }
  | { type: "none" };

export interface CanvasHandlers {
  pick(item: Picked): void;
  drill(node: CanvasNode): void;
}

const TIER_COLOURS: Record<string, string> = {
  core: "#4a148c",
  spine: "#6a1b9a",
  leaf: "#0b6bcb",
  torus: "#00838f",
  node: "#78909c",
};

export const MIN_LABEL_PX = 10;
const FONT = { switch: 15, group: 20, nodeGroup: 15, port: 15, edge: 18 };

/** Diff colours, shared by the canvas and its legend. */
export const DIFF_COLOURS: Record<string, string> = { added: "#2e7d32", removed: "#c62828", changed: "#ef6c00" };

export interface LabelSize {
  id: string;
  label: string;
  px: number;
  inView: boolean;
}

const STYLE: StylesheetJson = [
  {
    selector: "node",
    style: {
      label: "data(label)",
      "font-size": FONT.switch,
      color: "#1b2430",
      "text-valign": "bottom",
      "text-margin-y": 3,
      "text-wrap": "wrap",
      "text-max-width": "116px",
      width: 30,
      height: 20,
      shape: "round-rectangle",
      "background-color": "data(colour)",
      "border-width": 0,
      "min-zoomed-font-size": MIN_LABEL_PX,
    },
  },
  { selector: 'node[kind = "switch"][full = 0]', style: { "border-width": 2, "border-color": "#ef6c00" } },
  {
    selector: 'node[kind = "node-group"]',
    style: { shape: "rectangle", width: 56, height: 16, "background-color": "#cfd8dc", color: "#37474f", "font-size": FONT.nodeGroup },
  },
  {
    selector: 'node[kind = "group"]',
    style: {
      width: 200,
      height: 96,
      "text-max-width": "190px",
      "background-color": "#e3eaf2",
      "border-width": 1,
      "border-color": "#90a4ae",
      "text-valign": "center",
      "text-margin-y": 0,
      "font-size": FONT.group,
    },
  },
  { selector: 'node[kind = "group"][mini = 1]', style: { width: 150, height: 56, "text-max-width": "140px" } },
  {
    selector: "node:parent",
    style: {
      "background-opacity": 0.35,
      "background-color": "#eef1f5",
      "border-style": "dashed",
      "border-width": 1,
      "border-color": "#90a4ae",
      "text-valign": "top",
      "text-margin-y": -4,
      padding: "14px",
      "font-size": FONT.group,
      "text-max-width": "400px",
      color: "#5f6b7a",
    },
  },
  {
    selector: 'node[kind = "port"]',
    style: {
      width: 32,
      height: 32,
      shape: "rectangle",
      "text-valign": "center",
      "text-margin-y": 0,
      "font-size": FONT.port,
      "background-color": "#b0bec5",
      "border-width": 1,
      "border-color": "#607d8b",
    },
  },
  { selector: 'node[kind = "port"][free = 1]', style: { "background-color": "#fff", "border-color": "#2e7d32", "border-width": 2 } },
  { selector: "node.armed", style: { "border-width": 3, "border-color": "#ef6c00", "background-color": "#ffe0b2" } },
  {
    selector: "edge",
    style: {
      width: "mapData(count, 1, 64, 1, 6)",
      "line-color": "#9aa7b4",
      "curve-style": "haystack",
      "haystack-radius": 0,
      opacity: 0.7,
    },
  },
  { selector: 'edge[tier = "node_leaf"], edge[tier = "node_switch"]', style: { "line-color": "#b0bec5" } },
  { selector: 'edge[tier = "global"]', style: { "line-color": "#ad1457" } },
  {
    selector: "edge[label]",
    style: {
      label: "data(label)",
      "font-size": FONT.edge,
      "text-background-color": "#fff",
      "text-background-opacity": 0.8,
      "min-zoomed-font-size": MIN_LABEL_PX,
    },
  },
  { selector: ":selected", style: { "border-width": 3, "border-color": "#ef6c00", "line-color": "#ef6c00", opacity: 1 } },
  ...(["added", "removed", "changed"] as const).flatMap((status): StylesheetJson => [
    {
      selector: `node[diff = "${status}"]`,
      style: {
        "background-color": DIFF_COLOURS[status],
        "border-width": 3,
        "border-color": DIFF_COLOURS[status],
        "border-style": status === "removed" ? "dashed" : "solid",
        "background-opacity": status === "removed" ? 0.45 : 1,
        color: DIFF_COLOURS[status],
      },
    },
    {
      selector: `edge[diff = "${status}"]`,
      style: { "line-color": DIFF_COLOURS[status], opacity: 1, width: 4, "line-style": status === "removed" ? "dashed" : "solid", "z-index": 5 },
    },
  ]),
  { selector: 'node:parent[diff = "changed"]', style: { "background-color": "#fff3e0", "background-opacity": 0.5 } },
];

function nodeElement(n: CanvasNode): ElementDefinition {
  const colour = TIER_COLOURS[n.tier] ?? "#546e7a";
  const data: Record<string, unknown> = {
    id: n.id,
    label: n.label,
    kind: n.kind,
    tier: n.tier,
    colour,
    full: n.ports_used >= n.ports_total ? 1 : 0,
    free: n.kind === "port" && n.data.free ? 1 : 0,
  };
  if (n.parent) data.parent = n.parent;
  if (n.diff) data.diff = n.diff;
  if (n.data.mini === true) data.mini = 1;
  const compound = n.kind === "group" && n.data.compound === true;
  return { group: "nodes", data, position: compound ? undefined : { x: n.x, y: n.y } };
}

function edgeElement(e: CanvasEdge, labelled: boolean): ElementDefinition {
  const data: Record<string, unknown> = { id: e.id, source: e.source, target: e.target, count: e.count, tier: e.tier };
  if (labelled && e.count > 1) data.label = `${e.count} cables`;
  if (e.diff) data.diff = e.diff;
  return { group: "edges", data };
}

export class FabricCanvas {
  readonly cy: Core;
  private nodes = new Map<string, CanvasNode>();
  private edges = new Map<string, CanvasEdge>();
  view: CanvasView | null = null;

  constructor(container: HTMLElement, private handlers: CanvasHandlers) {
    this.cy = cytoscape({
      container,
      style: STYLE,
      layout: { name: "preset" },
      minZoom: 0.02,
      maxZoom: 4,
      textureOnViewport: true,
      hideEdgesOnViewport: true,
      boxSelectionEnabled: false,
      autoungrabify: true, // positions are the server's
    });
    this.cy.on("tap", (ev: EventObject) => {
      if (ev.target === this.cy) return this.handlers.pick({ type: "none" });
      const id = ev.target.id() as string;
      if (ev.target.isNode()) {
        const node = this.nodes.get(id);
        if (node) this.handlers.pick({ type: "node", node });
      } else {
        const edge = this.edges.get(id);
        if (edge) this.handlers.pick({ type: "edge", edge });
      }
    });
    this.cy.on("dbltap", "node", (ev: EventObject) => {
      const node = this.nodes.get(ev.target.id() as string);
      if (node) this.handlers.drill(node);
    });
  }

  render(view: CanvasView, keepViewport = false): void {
    this.view = view;
    this.nodes = new Map(view.nodes.map((n) => [n.id, n]));
    this.edges = new Map(view.edges.map((e) => [e.id, e]));
    const labelled = view.level === "fabric";
    const pan = this.cy.pan();
    const zoom = this.cy.zoom();
    this.cy.batch(() => {
      this.cy.elements().remove();
      this.cy.add([...view.nodes.map(nodeElement), ...view.edges.map((e) => edgeElement(e, labelled))]);
    });
    this.cy.layout({ name: "preset", fit: !keepViewport, padding: 30 }).run();
    if (keepViewport) this.cy.viewport({ zoom, pan });
    else this.readable();
  }

  /** After a fit: when the smallest label would be under MIN_LABEL_PX, zoom in to make it that
   * size instead and show the top-left of the level (the rest is a pan away). */
  private readable(): void {
    const fonts = this.cy.elements("[label]").map((el) => parseFloat(String(el.style("font-size"))));
    if (!fonts.length) return;
    const needed = (MIN_LABEL_PX * 1.05) / Math.min(...fonts);
    if (this.cy.zoom() >= needed) return;
    const box = this.cy.elements().boundingBox({});
    this.cy.zoom(needed);
    this.cy.pan({ x: 30 - box.x1 * needed, y: 30 - box.y1 * needed });
  }

  /** Every label's on-screen font size (canvas font size x zoom) and whether it is in view. */
  labelSizes(): LabelSize[] {
    const zoom = this.cy.zoom();
    const w = this.cy.width();
    const hgt = this.cy.height();
    return this.cy.elements("[label]").map((el) => {
      const box = el.renderedBoundingBox({ includeLabels: true });
      return {
        id: el.id(),
        label: String(el.data("label")),
        px: parseFloat(String(el.style("font-size"))) * zoom,
        inView: box.x2 > 0 && box.y2 > 0 && box.x1 < w && box.y1 < hgt,
      };
    });
  }

  node(id: string): CanvasNode | undefined {
    return this.nodes.get(id);
  }

  select(id: string): void {
    this.cy.elements(":selected").unselect();
    this.cy.getElementById(id).select();
  }

  arm(id: string | null): void {
    this.cy.nodes(".armed").removeClass("armed");
    if (id) this.cy.getElementById(id).addClass("armed");
  }
}
