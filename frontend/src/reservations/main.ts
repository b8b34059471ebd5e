// Entry of the reservation pages: self-service (form, preview, list) and one reservation.
// The operator pages load it only for the shared styles.

import "./reservations.css";
import { byTestId } from "../dom";
import { Board } from "./cards";
import { startReservePage } from "./page";
import type { DetailInit, PageInit } from "./types";

function startDetailPage(init: DetailInit): void {
  const board = new Board(byTestId("reservation-detail"), {
    urls: init.urls,
    pollMs: init.poll_ms,
    canWrite: init.can_write,
    role: init.role,
    userId: init.user_id,
    tenantNames: new Map([[init.reservation.tenant, init.tenant_name]]),
    poolNames: new Map([[init.reservation.pool, init.pool_name]]),
    linkTitles: false,
  });
  board.setConnection(init.reservation.id, init.connection);
  board.show([init.reservation]);
}

function start(): void {
  const el = document.getElementById("reservations-init");
  if (!el?.textContent) return;
  const init = JSON.parse(el.textContent) as PageInit;
  if (init.page === "detail") startDetailPage(init);
  else startReservePage(init);
  document.body.dataset.reservations = "ready";
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
