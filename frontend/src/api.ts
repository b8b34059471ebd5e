// Small fetch helpers shared by every page script: same-origin, CSRF-aware, one error shape. The
// answers' types are the generated OpenAPI types (see schema.ts), given as `api<T>`'s T.

/** The body of every error answer (console/tenancy/api/errors.py). Written here: the schema has no
 * component of its own for it (ReservationRefused is this plus the refused reservation). */
export interface ApiErrorBody {
  code: string;
  detail: string;
  fields: Record<string, unknown>;
}

export class ApiError extends Error {
  constructor(public status: number, public body: ApiErrorBody) {
    super(body.detail);
  }
}

export function csrfToken(): string {
  const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
  return match ? decodeURIComponent(match[1]) : "";
}

export async function api<T>(path: string, init: RequestInit = {}): Promise<T> {
  const headers = new Headers(init.headers);
  headers.set("Accept", "application/json");
  if (init.body && !headers.has("Content-Type")) headers.set("Content-Type", "application/json");
  if (init.method && init.method !== "GET") headers.set("X-CSRFToken", csrfToken());
  const response = await fetch(path, { ...init, headers, credentials: "same-origin" });
  if (!response.ok) {
    const body = (await response.json().catch(() => ({
      code: "http_error",
      detail: response.statusText,
      fields: {},
    }))) as ApiErrorBody;
    throw new ApiError(response.status, body);
  }
  return (response.status === 204 ? undefined : await response.json()) as T;
}
