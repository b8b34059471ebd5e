// Shapes exchanged with the designer API and the page's json_script data. The API's typed answers
// are aliases of the generated OpenAPI types; the rest is written here because the schema does not
// describe it: the page's json_script data (console/web) and the graph, canvas and diff documents,
// which the schema types as free-form JSON objects (designer.serialize, designer.canvas,
// designer.compare build them).

import type { Schemas } from "../schema";

export type PlanOptions = Schemas["PlanOptionsRequest"];
export type Topology = Schemas["TopologyEnum"];
export type Issue = Schemas["Issue"];
export type Summary = Schemas["PlanSummary"];
export type ValidationResult = Schemas["ValidationResult"];
export type CompareResult = Schemas["CompareResult"];
export type Design = Schemas["Design"];

/** A revision's stored summary is free-form JSON in the schema (kept as it was planned, so an old
 * revision's may lack newer keys); the page reads it as a plan summary. */
export type Revision = Omit<Schemas["Revision"], "summary"> & { readonly summary: Summary };

// --- not in the schema: the page's json_script data (console/web/designer_views.py) ---------

export interface SwitchModel {
  name: string;
  ports: number;
  cages: number;
  speed: string;
  port_gbps: number;
  split_modes: Record<string, [number, number]>;
  [key: string]: unknown;
}

export interface CableType {
  name: string;
  kind: string;
  max_speed: string;
  reach_min_m: number;
  reach_max_m: number;
  [key: string]: unknown;
}

export interface Catalogue {
  switches: SwitchModel[];
  nodes: { name: string; gpus: number; hcas: number; [key: string]: unknown }[];
  cables: CableType[];
  transceivers: { name: string; [key: string]: unknown }[];
}

export interface RevisionRef {
  number: number;
  message: string;
  created_at: string;
  url: string;
}

export interface ExportRef {
  name: string;
  filename: string;
  description: string;
  url: string;
}

export interface PageInit {
  page: "new" | "canvas";
  editable: boolean;
  catalogue: Catalogue;
  topologies?: string[];
  design?: { id: number; name: string; description: string; topology: string; latest_revision: number };
  revision?: number;
  revisions?: RevisionRef[];
  exports?: ExportRef[];
  canvas_url?: string;
}

// --- free-form JSON in the schema: the graph, canvas and diff documents -----------------------

// designer.serialize.graph_to_dict
export type LinkRow = [string, number, string, number, string, string, number];

export interface SwitchRow {
  name: string;
  model: string;
  tier: string;
  guid: string;
  rack: string;
  u: number;
  su: number;
  pod: number;
  index: number;
  split: string | null;
  coords: number[];
}

export interface NodeRow {
  name: string;
  port_guids: string[];
  [key: string]: unknown;
}

export interface GraphDoc {
  format: string;
  version: number;
  topology: string;
  meta: Record<string, unknown>;
  catalogue: { switches: SwitchModel[]; nodes: unknown[]; cables: CableType[]; transceivers: unknown[] };
  racks: unknown[];
  switches: SwitchRow[];
  nodes: NodeRow[];
  links: LinkRow[];
}

// designer.canvas.canvas_view
export interface CanvasNode {
  id: string;
  label: string;
  kind: "switch" | "node-group" | "group" | "port";
  tier: string;
  x: number;
  y: number;
  parent?: string;
  ports_used: number;
  ports_total: number;
  data: Record<string, unknown>;
  diff?: DiffStatus;
}

export type DiffStatus = "added" | "removed" | "changed";
export type DiffCounts = Record<DiffStatus, number>;

export type EdgeLink = [string, number, string, number, string, number];

export interface CanvasEdge {
  id: string;
  source: string;
  target: string;
  count: number;
  tier: string;
  cable: string;
  links?: EdgeLink[];
  diff?: DiffStatus;
  diff_counts?: Partial<DiffCounts>;
}

export interface Crumb {
  level: string;
  focus: string | null;
  label: string;
}

export interface PortRow {
  port: number;
  cage: number;
  peer: string;
  peer_port: number | null;
  cable: string;
  length_m: number | null;
  tier: string;
  free: boolean;
}

export interface CanvasView {
  level: "fabric" | "pod" | "switch";
  focus: string | null;
  topology: string;
  nodes: CanvasNode[];
  edges: CanvasEdge[];
  breadcrumbs: Crumb[];
  ports?: PortRow[];
  counts: { switches: number; nodes: number; links: number };
  diff?: { switches: DiffCounts; cables: DiffCounts };
}

export interface DiffSide {
  added: unknown[];
  removed: unknown[];
  changed?: unknown[];
}

export interface RevisionDiff {
  from?: number;
  to?: number;
  switches: DiffSide;
  cables: DiffSide;
  nodes?: DiffSide;
  empty?: boolean;
}
