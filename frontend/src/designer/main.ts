// Entry of the designer pages: the new-design form or the canvas of a saved revision.

import "./designer.css";
import { startCanvasPage } from "./page";
import { startPlanner } from "./planner";
import type { PageInit } from "./types";

function start(): void {
  const el = document.getElementById("designer-init");
  if (!el?.textContent) return;
  const init = JSON.parse(el.textContent) as PageInit;
  if (init.page === "canvas") startCanvasPage(init);
  else startPlanner(init);
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
