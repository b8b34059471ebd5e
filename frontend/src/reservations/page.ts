// The self-service page: quota and usage, availability, the reservation form with a live
// placement preview, and the reservations list that follows each one until it settles.

import { api, ApiError, postOnce } from "../api";
import { byTestId, debounce, h } from "../dom";
import { Board } from "./cards";
import { renderTimelines } from "./timeline";
import { renderPreview } from "./preview";
import type { Offer, Paged, Preview, PriorityClass, Quota, Reservation, ReservationRequest, ReserveInit } from "./types";

export function startReservePage(init: ReserveInit): void {
  const tenantNames = new Map(init.tenants.map((t) => [t.id, t.name]));
  const poolNames = new Map(init.pools.map((p) => [p.id, p.name]));
  const refresh = () => {
    void loadQuotas(init, tenantNames, poolNames);
    void renderTimelines(byTestId("timelines"), init.urls.api, init.pools);
  };
  const board = new Board(byTestId("reservation-list"), {
    urls: init.urls,
    pollMs: init.poll_ms,
    canWrite: init.can_write,
    role: init.role,
    userId: init.user_id,
    tenantNames: init.is_operator ? tenantNames : new Map(),
    poolNames,
    linkTitles: true,
    onChange: refresh,
  });
  refresh();
  // the live ones as cards (each followed until it settles); the finished ones are the table below
  void api<Paged<Reservation>>(`${init.urls.api}reservations/?state=live&page_size=50&ordering=-created_at`)
    .then((page) => board.show(page.results))
    .catch((exc) => byTestId("reservation-list").replaceChildren(h("p", { class: "error" }, String(exc))));
  const form = document.querySelector<HTMLFormElement>("#reserve-form");
  if (form) startForm(init, form, board, refresh);
}

async function loadQuotas(
  init: ReserveInit,
  tenantNames: Map<number, string>,
  poolNames: Map<number, string>,
): Promise<void> {
  const body = byTestId("quota-table").querySelector("tbody")!;
  try {
    const page = await api<Paged<Quota>>(`${init.urls.api}quotas/?page_size=500`);
    const rows = page.results.map((q) =>
      h(
        "tr",
        { testid: "quota-row", "data-pool": poolNames.get(q.pool) ?? String(q.pool) },
        init.is_operator ? h("td", {}, tenantName(tenantNames, q.tenant)) : null,
        h("td", {}, poolNames.get(q.pool) ?? String(q.pool)),
        h("td", { testid: "quota-guaranteed" }, String(q.usage.guaranteed_gpus)),
        h("td", { testid: "quota-borrow" }, String(q.usage.borrow_limit_gpus)),
        h("td", { testid: "quota-used" }, String(q.usage.used_gpus)),
        h("td", { testid: "quota-borrowed" }, String(q.usage.borrowed_gpus)),
        h("td", { testid: "quota-peak" }, String(q.usage.peak_future_gpus)),
        h("td", { testid: "quota-headroom" }, String(q.usage.headroom_gpus)),
      ),
    );
    body.replaceChildren(
      ...(rows.length ? rows : [h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No quota in any pool yet: ask an operator."))]),
    );
  } catch (exc) {
    body.replaceChildren(h("tr", {}, h("td", { colspan: 8, class: "error" }, String(exc))));
  }
}

// The schema has a quota's tenant optional (it may be left out of a write); answers always carry it.
function tenantName(names: Map<number, string>, tenant: number | undefined): string {
  return tenant === undefined ? "–" : (names.get(tenant) ?? String(tenant));
}

function field<T extends HTMLInputElement | HTMLSelectElement>(form: HTMLFormElement, name: string): T {
  return form.elements.namedItem(name) as T;
}

/** The API request of the form, or a message saying what is missing. */
/** The API's request with the registered constraint parameters: plug-ins may add keys the schema
 * of this build does not name, and the server validates every one of them. */
type ConstrainedRequest = ReservationRequest & Record<string, unknown>;

export function requestOf(form: HTMLFormElement, init: ReserveInit): ConstrainedRequest | string {
  const value = (name: string) => field<HTMLInputElement>(form, name)?.value?.trim() ?? "";
  const checked = (name: string) => field<HTMLInputElement>(form, name)?.checked ?? false;
  const size = Number(value("size"));
  if (!Number.isInteger(size) || size < 1) return "Give a whole number of GPUs or nodes.";
  const hours = Number(value("duration_hours"));
  if (!(hours > 0)) return "Give a duration.";
  const body: ConstrainedRequest = {
    pool: Number(value("pool")),
    ...(value("size_by") === "nodes" ? { nodes: size } : { gpus: size }),
    duration_minutes: Math.max(1, Math.round(hours * 60)),
    priority_class: value("priority_class") as PriorityClass,
    name: value("name"),
  };
  // The constraint controls are rendered from the registered constraint types: a checkbox sends
  // a boolean, a number its value (or nothing when empty), anything else its text.
  form.querySelectorAll<HTMLInputElement | HTMLSelectElement>("[data-constraint]").forEach((control) => {
    if (control instanceof HTMLInputElement && control.type === "checkbox") body[control.name] = checked(control.name);
    else if (control instanceof HTMLInputElement && control.type === "number") {
      if (value(control.name) !== "") body[control.name] = Number(value(control.name));
    } else body[control.name] = value(control.name);
  });
  const when = form.querySelector<HTMLInputElement>("input[name=when]:checked")?.value ?? "now";
  if (when === "asap") {
    body.start = "asap";
    if (value("max_wait_minutes") !== "") body.max_wait_minutes = Number(value("max_wait_minutes"));
  }
  if (when === "window") {
    const start = value("start");
    if (!start) return "Type the window's start (UTC, 24-hour: YYYY-MM-DD HH:MM).";
    const utc = parseUtc(start);
    if (!utc) return `"${start}" is not a UTC time: write YYYY-MM-DD HH:MM (24-hour).`;
    body.start = utc;
  }
  if (init.is_operator) body.tenant = Number(value("tenant"));
  // Near and spanning: only a pool with nodes at several sites shows (and sends) them.
  if (init.pools.find((p) => p.id === body.pool)?.multi_site) {
    if (value("near") !== "") body.near = value("near");
    body.span_sites = checked("span_sites");
  }
  return body;
}

/** "2026-12-02 14:30" (or with a T, seconds, a trailing Z or "UTC") read as UTC; ISO 8601 string or null. */
export function parseUtc(text: string): string | null {
  const m = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2}))?\s*(?:Z|UTC)?$/i.exec(text.trim());
  if (!m) return null;
  const [y, mo, d, hh, mi, ss] = m.slice(1).map((part) => Number(part ?? 0));
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || hh > 23 || mi > 59 || ss > 59) return null;
  const when = new Date(Date.UTC(y, mo - 1, d, hh, mi, ss));
  if (when.getUTCDate() !== d) return null;
  return when.toISOString();
}

function startForm(init: ReserveInit, form: HTMLFormElement, board: Board, refresh: () => void): void {
  const models = field<HTMLSelectElement>(form, "gpu_model");
  const pool = field<HTMLSelectElement>(form, "pool");
  const fillModels = () => {
    const info = init.pools.find((p) => String(p.id) === pool.value);
    models.replaceChildren(h("option", { value: "" }, "any"), ...(info?.gpu_models ?? []).map((m) => h("option", { value: m }, m)));
  };
  const sites = form.querySelector<HTMLElement>("[data-testid=res-sites]");
  const showSites = () => {
    if (sites) sites.hidden = !init.pools.find((p) => String(p.id) === pool.value)?.multi_site;
  };
  fillModels();
  showSites();
  pool.addEventListener("change", fillModels);
  pool.addEventListener("change", showSites);
  const start = field<HTMLInputElement>(form, "start");
  start.addEventListener("focus", () => {
    form.querySelector<HTMLInputElement>("input[name=when][value=window]")!.checked = true;
  });

  const state = byTestId("preview-state");
  const out = byTestId("res-preview");
  const error = byTestId("submit-error");
  const submit = byTestId<HTMLButtonElement>("res-submit");
  const setWhen = (when: string) => {
    form.querySelector<HTMLInputElement>(`input[name=when][value=${when}]`)!.checked = true;
  };
  // Size buttons: one click sets the size in GPUs (the preview follows).
  form.querySelectorAll<HTMLButtonElement>("button[data-preset]").forEach((button) =>
    button.addEventListener("click", () => {
      field<HTMLSelectElement>(form, "size_by").value = "gpus";
      field<HTMLInputElement>(form, "size").value = button.dataset.preset ?? "8";
      preview();
    }),
  );
  // An offer fills the form with what it offers, in the unit it is offered in (whole nodes when
  // the request asked for nodes), and reserves it.
  const take = (offer: Offer) => {
    const nodes = offer.nodes ?? null;
    field<HTMLSelectElement>(form, "size_by").value = nodes === null ? "gpus" : "nodes";
    field<HTMLInputElement>(form, "size").value = String(nodes ?? offer.gpus);
    if (offer.kind === "later" && offer.start) {
      setWhen("window");
      start.value = offer.start.slice(0, 16).replace("T", " ");
    } else setWhen(offer.kind === "queue" ? "asap" : "now");
    void reserve();
  };
  let seq = 0;
  let shown = ""; // the answer on screen: the same answer again leaves the panel alone
  const preview = debounce(async () => {
    const mine = ++seq;
    const body = requestOf(form, init);
    if (typeof body === "string") {
      state.textContent = "incomplete";
      state.className = "badge";
      shown = "";
      out.replaceChildren(h("p", { class: "muted" }, body));
      submit.disabled = false;
      return;
    }
    state.textContent = "…";
    try {
      const result = await api<Preview>(`${init.urls.api}reservations/preview/`, {
        method: "POST",
        body: JSON.stringify(body),
      });
      if (mine !== seq) return;
      // An edit's "change" fires when a click elsewhere (on a panel's summary) takes the focus:
      // an unchanged answer is not drawn again, and a new one keeps the panels that were open
      // (re-drawn, the first click after an edit was lost on the panel it replaced).
      const key = JSON.stringify([result, body.start === "asap"]);
      if (key === shown) {
        state.textContent = state.dataset.verdict ?? state.textContent;
        return;
      }
      shown = key;
      const open = new Set([...out.querySelectorAll("details[open] > summary")].map((s) => s.textContent ?? ""));
      const verdict = renderPreview(result, body.start === "asap", state, out, take);
      out.querySelectorAll("details").forEach((d) => {
        if (open.has(d.querySelector("summary")?.textContent ?? "")) d.open = true;
      });
      state.dataset.verdict = state.textContent ?? "";
      submit.disabled = !verdict.canReserve;
      submit.textContent = verdict.label;
    } catch (exc) {
      if (mine !== seq) return;
      state.textContent = "invalid";
      state.className = "badge bad";
      shown = "";
      out.replaceChildren(h("p", { class: "error", testid: "preview-error" }, errorText(exc)));
      submit.disabled = false;
    }
  }, 300);
  form.addEventListener("input", () => preview());
  form.addEventListener("change", () => preview());
  preview();

  const reserve = async () => {
    error.textContent = "";
    const body = requestOf(form, init);
    if (typeof body === "string") {
      error.textContent = body;
      return;
    }
    submit.disabled = true;
    try {
      // One key per submit: a retry after a lost answer gets the same reservation, not a second.
      const created = await postOnce<Reservation>(`${init.urls.api}reservations/`, body);
      board.upsert(created);
      refresh();
    } catch (exc) {
      error.textContent = errorText(exc);
      const refused = exc instanceof ApiError ? (exc.body as { reservation?: Reservation }).reservation : undefined;
      if (refused) board.upsert(refused);
    } finally {
      submit.disabled = false;
      preview();
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    void reserve();
  });
}

function errorText(exc: unknown): string {
  if (!(exc instanceof ApiError)) return String(exc);
  const fields = Object.entries(exc.body.fields ?? {})
    .map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join(" ") : JSON.stringify(v)}`)
    .join("; ");
  return fields ? `${exc.body.detail} (${fields})` : exc.body.detail;
}
