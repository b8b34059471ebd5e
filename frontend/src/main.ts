import "./styles.css";
import { csrfToken } from "./api";
import { bindConfirmForms } from "./confirm";
import { pollDashboard } from "./dashboard";
import { followJob } from "./follow";

// Pages are server-rendered; this bundle adds small progressive enhancements and is the entry
// point the designer, reservation and live views build on.
document.addEventListener("DOMContentLoaded", () => {
  document.documentElement.dataset.js = "ready";
  bindConfirmForms();
  for (const el of document.querySelectorAll<HTMLElement>("code.secret")) {
    el.title = "Click to copy";
    el.addEventListener("click", () => void navigator.clipboard?.writeText(el.textContent ?? ""));
  }
  const dashboard = document.getElementById("dashboard");
  if (dashboard) pollDashboard(dashboard);
  for (const job of document.querySelectorAll<HTMLElement>("[data-follow-job]")) followJob(job);
  if (!csrfToken()) return;
});
