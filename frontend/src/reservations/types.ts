// Shapes of the reservation pages' initial data and of the scheduling API's answers.

export interface PoolInfo {
  id: number;
  name: string;
  fabric: string;
  nodes: number;
  gpus: number;
  gpu_models: string[];
}

export interface Urls {
  detail: string; // "/reservations/0/": 0 is replaced by the id
  connection: string;
  api: string;
}

interface InitBase {
  role: string;
  can_write: boolean;
  is_operator: boolean;
  urls: Urls;
  poll_ms: number;
}

export interface NamedRef {
  id: number;
  name: string;
}

export interface ReserveInit extends InitBase {
  page: "reserve";
  tenant: NamedRef | null;
  tenants: NamedRef[];
  pools: PoolInfo[];
  priority_classes: string[];
}

export interface DetailInit extends InitBase {
  page: "detail";
  reservation: Reservation;
  connection: ConnectionNode[];
  tenant_name: string;
  pool_name: string;
}

export type PageInit = ReserveInit | DetailInit;

export interface Placement {
  nodes: string[];
  gpu_indices: number[][];
  leaf_groups: string[];
  leaves: string[];
  spines: string[];
  rail_aligned: boolean;
  max_switch_hops: number;
  score: number;
}

export interface Rejection {
  reason: string;
  message: string;
  details: Record<string, unknown>;
}

export type Status =
  | "requested"
  | "placed"
  | "provisioning"
  | "ready"
  | "ending"
  | "released"
  | "rejected"
  | "preempted"
  | "cancelled";

export interface Reservation {
  id: number;
  tenant: number;
  pool: number;
  name: string;
  status: Status;
  priority_class: string;
  requested_gpus: number | null;
  requested_nodes: number | null;
  gpu_model: string;
  same_leaf: boolean;
  max_switch_hops: number | null;
  rail_aligned: boolean;
  start: string;
  end: string;
  gpus: number;
  borrowed: boolean;
  pkey: number | null;
  pkey_hex: string | null;
  partition: string;
  sl: number;
  placement: Partial<Placement>;
  reason: string;
  explanation: Partial<Rejection>;
  fabric_error: string;
  created_at: string;
  ready_at: string | null;
  ended_at: string | null;
}

export interface Preview {
  placeable: boolean;
  start: string;
  end: string;
  gpus: number;
  borrowed: boolean;
  quota: { limit_gpus: number; guaranteed_gpus: number; held_gpus: number };
  placement: Placement | null;
  preempts: number[];
  rejection: Rejection | null;
}

export interface QuotaUsage {
  guaranteed_gpus: number;
  borrow_limit_gpus: number;
  limit_gpus: number;
  used_gpus: number;
  borrowed_gpus: number;
  peak_future_gpus: number;
  headroom_gpus: number;
}

export interface Quota {
  id: number;
  tenant: number;
  pool: number;
  guaranteed_gpus: number;
  borrow_limit_gpus: number;
  usage: QuotaUsage;
}

export interface Paged<T> {
  count: number;
  results: T[];
}

export interface Slot {
  start: string;
  end: string;
  free_gpus: number;
  free_nodes: number;
  largest_free_leaf_group_nodes: number;
}

export interface Availability {
  pool: number;
  total_gpus: number;
  total_nodes: number;
  leaf_groups: number;
  slots: Slot[];
}

export interface HcaPort {
  index: number;
  rail: number;
  port_guid: string;
  leaf: string;
  leaf_port: number | null;
}

export interface ConnectionNode {
  node: string;
  gpus: number[];
  hcas: HcaPort[];
}
