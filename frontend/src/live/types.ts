// Shapes of the live page: its json_script init, the REST snapshot and the socket messages
// (console/live/schemas.py is the server's side of these).

import type { CanvasView } from "../designer/types";

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
}

export interface PortPeer {
  name: string;
  port: number;
  kind: "switch" | "node";
  tier: string;
}

/** One row of /api/telemetry/fabrics/<id>/switches/<name>/ports/. */
export interface SwitchPort {
  port: number;
  link: string | null; // the telemetry link id (upper end); null for a free port
  measured_here: boolean; // false: counters are read at the peer, so Tx/Rx are swapped
  peer: PortPeer | null;
  tier: string;
  cable: string;
  rate: string;
  gbps: number | null;
  state: "Active" | "Down" | "unknown" | "free";
  up: boolean | null;
  tx_bps: number | null;
  rx_bps: number | null;
  util: number | null;
  bucket: number | null;
  errors: Record<string, number>;
  error_totals: Record<string, number>;
}

export interface SwitchPorts {
  fabric: number;
  switch: string;
  tier: string;
  model: string;
  ports_total: number;
  group: string;
  seq: number;
  collector: string;
  ports: SwitchPort[];
}

export interface TenantSlice {
  links: string[];
  reservations: Record<string, string[]>;
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
}

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
  | { type: "error"; code: string; detail: string }
  | { type: "pong" };
