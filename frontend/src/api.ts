// Small fetch helpers shared by every page script: same-origin, CSRF-aware, one error shape. The
// answers' types are the generated OpenAPI types (see schema.ts), given as `api<T>`'s T.

/** The body of every error answer (console/tenancy/api/errors.py; the schema's `Error` component;
 * ReservationRefused is this plus the refused reservation). */
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

/** A fresh `Idempotency-Key`: one per user action (a submit, a click). Built from
 * `crypto.getRandomValues`, which (unlike `randomUUID`) also exists on plain-http origins. */
export function idempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Transient failures of a write worth retrying: the answer never arrived (network error), the
 * database was away (503), or the first try with this key is still running (409 in progress). */
function retryable(exc: unknown): boolean {
  if (!(exc instanceof ApiError)) return true;
  return exc.status === 503 || (exc.status === 409 && exc.body.code === "idempotency_key_in_progress");
}

/** POST a write with one `Idempotency-Key` for this attempt, retried with the same key when the
 * answer was lost: the server replays the first answer, so the write happens at most once. */
export async function postOnce<T>(path: string, body?: unknown, attempts = 3): Promise<T> {
  const key = idempotencyKey();
  for (let attempt = 1; ; attempt++) {
    try {
      return await api<T>(path, {
        method: "POST",
        body: body === undefined ? undefined : JSON.stringify(body),
        headers: { "Idempotency-Key": key },
      });
    } catch (exc) {
      if (attempt >= attempts || !retryable(exc)) throw exc;
      await new Promise((resolve) => setTimeout(resolve, 500 * attempt));
    }
  }
}
