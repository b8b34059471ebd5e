// The fabric change page: poll the REST API until the change is terminal. A bundle, not an inline
// script, so the Content-Security-Policy needs no 'unsafe-inline'.
import { byTestId } from "./dom";

interface Step {
  seq: number;
  name: string;
  target: string;
  status: string;
  duration_s: number | null;
  log: string;
}
interface Change {
  status: string;
  error: string;
  is_terminal: boolean;
  progress: { percent: number };
  steps: Step[];
}
interface Init {
  api: string;
  poll_ms: number;
  change: Change;
}

function cell(text: string | number | null, cls?: string): HTMLTableCellElement {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function show(change: Change): void {
  byTestId("change-status").textContent = change.status;
  byTestId<HTMLProgressElement>("change-progress").value = change.progress.percent;
  byTestId("change-progress-text").textContent = `${change.progress.percent}%`;
  const error = byTestId("change-error");
  error.textContent = change.error || "";
  error.hidden = !change.error;
  const body = byTestId("change-steps").querySelector("tbody");
  if (!body) return;
  body.replaceChildren(
    ...change.steps.map((s) => {
      const tr = document.createElement("tr");
      tr.dataset.testid = "change-step";
      tr.dataset.step = s.name;
      tr.dataset.status = s.status;
      const pre = document.createElement("pre");
      pre.textContent = s.log;
      const log = document.createElement("td");
      log.append(pre);
      tr.append(
        cell(s.seq),
        cell(s.name),
        cell(s.target),
        cell(s.status, `status-${s.status}`),
        cell(s.duration_s == null ? "" : `${s.duration_s.toFixed(2)} s`),
        log,
      );
      return tr;
    }),
  );
}

const initElement = document.getElementById("fabric-change-init");
if (initElement?.textContent) {
  const init = JSON.parse(initElement.textContent) as Init;
  const poll = async (): Promise<void> => {
    try {
      const response = await fetch(init.api, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (response.ok) {
        const change = (await response.json()) as Change;
        show(change);
        if (change.is_terminal) return;
      }
    } catch {
      /* transient: try again */
    }
    setTimeout(() => void poll(), init.poll_ms);
  };
  if (!init.change.is_terminal) setTimeout(() => void poll(), init.poll_ms);
}
