// Shapes of the live page. Written here, because the API schema does not describe them: its
// json_script init (console/web/live_views.py), the REST snapshot and the socket messages
// (console/live/schemas.py is the server's side of these). The REST port table and event/change
// lists are aliases of the generated OpenAPI types.

import type { CanvasView } from "../designer/types";
import type { Schemas } from "../schema";
import type { NodePowerState } from "./power";

export interface LiveInit {
  fabric: number;
  name: string;
  role: string;
  operator: boolean;
  can_write: boolean;
  tenant: number | null;
  ws: string;
  canvas: CanvasView;
  switch: string | null; // open this switch's port table on load
}

export interface LinkState {
  id: string;
  up: boolean;
  bucket: number;
  util: number;
  tx_bps: number;
  rx_bps: number;
  errors: Record<string, number>;
  error_totals: Record<string, number>;
  xmit_wait?: number; // PortXmitWait ticks per second (congestion)
}

// The REST port table, from the generated OpenAPI types.
export type PortPeer = Schemas["PortPeer"];
/** One row of /api/telemetry/fabrics/<id>/switches/<name>/ports/. */
export type SwitchPort = Schemas["SwitchPort"];
export type SwitchPorts = Schemas["SwitchPorts"];
/** The REST answer of the events list and of acknowledge/resolve: a superset of the socket's
 * ``event`` body, so it can stand wherever a LiveEvent is expected. */
export type FabricEvent = Schemas["FabricEvent"];
export type FabricEventPage = Schemas["PaginatedFabricEventList"];
export type ChangePage = Schemas["PaginatedChangeListList"];

// The REST snapshot is free-form JSON in the schema (console.telemetry builds it from the same
// link states the socket sends): written here.
export interface TenantSlice {
  name?: string;
  links: string[];
  reservations: Record<string, string[]>;
  reservation_names?: Record<string, string>;
}

export interface Snapshot {
  fabric: number;
  group: string;
  seq: number;
  epoch: number | null;
  at: number | null;
  collector: string;
  links: LinkState[];
  summary?: Record<string, number>;
  tenants?: Record<string, TenantSlice>;
  reservations?: Record<string, string[]>;
  reservation_names?: Record<string, string>;
  power?: Record<string, NodePowerState>; // nodes that are not on (absent: on)
}

// --- socket messages ---------------------------------------------------------------------------

export interface LiveEvent {
  id: number;
  kind: string;
  severity: string;
  status: string;
  subject: string;
  message: string;
  opened_at: string;
  reservations: number[];
}

export interface ChangeStep {
  seq: number;
  name: string;
  target: string;
  status: string;
}

export type Message =
  | { type: "hello"; user: string; role: string }
  | { type: "subscribed"; group: string; seq: number }
  | { type: "link.delta"; group: string; seq: number; fabric: number; at: number; links: LinkState[] }
  | { type: "event"; group: string; seq: number; fabric: number; event: LiveEvent }
  | ({ type: "node.power"; group: string; seq: number; fabric: number; node: string } & NodePowerState)
  | {
      type: "change.progress";
      group: string;
      seq: number;
      change: number;
      fabric: number;
      status: string;
      steps: ChangeStep[];
      error?: string;
    }
  | { type: "access.revoked" }
  | { type: "access.ended" }
  | { type: "access.expired" }
  | { type: "error"; code: string; detail: string }
  | { type: "pong" };
