// The reservation pages' initial data (json_script, built by console/web/reservation_views.py;
// not part of the API schema, so written here) and aliases of the scheduling API's types.

import type { Schemas } from "../schema";

export interface PoolInfo {
  id: number;
  name: string;
  fabric: string;
  nodes: number;
  gpus: number;
  gpu_models: string[];
  /** Slugs of the sites of its nodes; ``multi_site``: nodes at more than one site. */
  sites: string[];
  multi_site: boolean;
}

export interface Choice {
  value: string;
  label: string;
}

export interface Urls {
  detail: string; // "/reservations/0/": 0 is replaced by the id
  connection: string;
  use: string; // "/reservations/0/use/": how to use it (hosts, SSH, NCCL variables)
  api: string;
}

interface InitBase {
  role: string;
  user_id: number | null;
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
  /** The form's "Near" options: sites, then the tenant's datasets ("dataset:<name>"). */
  near: { sites: Choice[]; datasets: Choice[] };
  default_pool: number | null; // the tenant's pool, preselected
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

// The scheduling API's answers, from the generated OpenAPI types.
export type Placement = Schemas["Placement"];
export type Rejection = Schemas["Rejection"];
export type Preview = Schemas["Preview"];
export type Offer = Schemas["Offer"];
export type Quota = Schemas["Quota"];
export type Availability = Schemas["Availability"];
export type ReservationRequest = Schemas["ReservationRequestRequest"];
export type PriorityClass = Schemas["PriorityClassEnum"];

/** The schema types ``placement`` and ``explanation`` as free-form JSON (model JSON fields): they
 * hold a placement once placed and a rejection once refused, and are empty objects until then. */
export type Reservation = Omit<Schemas["Reservation"], "placement" | "explanation"> & {
  readonly placement: Partial<Placement>;
  readonly explanation: Partial<Rejection>;
};

/** A page of a list endpoint: the envelope of the schema's Paginated*List types, with results of a
 * type refined here. */
export type Paged<T> = Omit<Schemas["PaginatedReservationList"], "results"> & { results: T[] };

// The connection details come from a page view (console/web), not from the API: no schema.
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
