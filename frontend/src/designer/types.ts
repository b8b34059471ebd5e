// Shapes exchanged with the designer API and the page's json_script data.

export type PlanOptions = Record<string, string | number | boolean>;

export interface Issue {
  severity: string;
  code: string;
  element: string;
  message: string;
}

export interface Summary {
  topology: string;
  nodes: number;
  gpus: number;
  endpoints: number;
  switches: Record<string, number>;
  cables: Record<string, number>;
  transceivers: number;
  oversubscription: string | null;
  bisection_bandwidth_gbps: number;
  diameter_switch_hops: number | null;
  power_w: number;
  cost: number;
  warnings: string[];
  errors: string[];
  issues?: Issue[];
  levels?: number | null;
  max_latency_ns?: number | null;
  racks?: number;
}

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
}

export type EdgeLink = [string, number, string, number, string, number];

export interface CanvasEdge {
  id: string;
  source: string;
  target: string;
  count: number;
  tier: string;
  cable: string;
  links?: EdgeLink[];
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
}

export interface ValidationResult {
  summary: Summary;
  issues: Issue[];
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
