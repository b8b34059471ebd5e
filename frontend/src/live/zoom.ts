// Zooming into a switch opens its port table: the last level of detail, reached the way a map
// is read. Once a zoom-in draws switches at least SWITCH_PX wide, the switch under the point
// zoomed into (the wheel's pointer, or the middle of the canvas for other zooms) opens. It opens
// once per zoom-in: zooming out below the threshold re-arms it, so a table closed while zoomed
// in stays closed.

import type { Core, EventObject, NodeSingular } from "cytoscape";

/** Rendered width at which a switch is big enough to be "zoomed into" (3× its size at zoom 1). */
export const SWITCH_PX = 78;

interface Point {
  x: number;
  y: number;
}

/** The switch drawn under `at`, else the nearest one within one switch width of it. */
export function switchAt(switches: Iterable<NodeSingular>, at: Point): NodeSingular | null {
  let best: NodeSingular | null = null;
  let bestD = Infinity;
  for (const n of switches) {
    const p = n.renderedPosition();
    const w = n.renderedOuterWidth();
    const h = n.renderedOuterHeight();
    const dx = Math.max(0, Math.abs(at.x - p.x) - w / 2);
    const dy = Math.max(0, Math.abs(at.y - p.y) - h / 2);
    const d = Math.hypot(dx, dy);
    if (d <= w && d < bestD) {
      best = n;
      bestD = d;
    }
  }
  return best;
}

export class ZoomToSwitch {
  private focus: Point | null = null;
  private zoom: number;
  private armed = true;
  private pending = false;

  constructor(private cy: Core, private open: (id: string) => void) {
    this.zoom = cy.zoom();
    // Cytoscape zooms about the wheel's pointer, so that point is what is zoomed into. The DOM
    // event carries it even when the pointer is over a node (Cytoscape's events then target it).
    cy.container()?.addEventListener(
      "wheel",
      (ev: WheelEvent) => {
        const box = (ev.currentTarget as HTMLElement).getBoundingClientRect();
        this.focus = { x: ev.clientX - box.left, y: ev.clientY - box.top };
      },
      { capture: true, passive: true },
    );
    cy.on("zoom", (_ev: EventObject) => this.schedule());
  }

  /** One check per frame, however many zoom events the wheel produced in it. */
  private schedule(): void {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.check();
    });
  }

  private check(): void {
    const zoom = this.cy.zoom();
    const zoomedIn = zoom > this.zoom;
    this.zoom = zoom;
    const switches = this.cy.nodes('[kind = "switch"]');
    if (!switches.length) return;
    const big = switches[0].renderedOuterWidth() >= SWITCH_PX;
    if (!big) {
      this.armed = true;
      return;
    }
    if (!zoomedIn || !this.armed) return;
    const focus = this.focus ?? { x: this.cy.width() / 2, y: this.cy.height() / 2 };
    this.focus = null;
    const hit = switchAt(switches, focus);
    if (!hit) return;
    this.armed = false;
    this.open(hit.id());
  }
}
