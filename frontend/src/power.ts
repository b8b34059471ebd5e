// The node power page: power on / graceful off / force off through the power API after a
// confirmation that says what each does, then follow the state until the BMC has answered
// (the page reloads then, so the history table shows the rows the action added).
import { api, ApiError } from "./api";
import { confirmAction } from "./confirm";
import { byTestId, maybeTestId } from "./dom";
import type { Schemas } from "./schema";

type NodePower = Schemas["NodePower"];

interface Init {
  node: number;
  name: string;
  api: string;
  power_state: string;
  boot_s: number;
  can_act: boolean;
  poll_ms: number;
}

/** The words and glyphs of console/web/templatetags/power.py (the page renders them first). */
const WORDS: Record<string, [string, string]> = {
  on: ["", "on"],
  "powering-on": ["↑", "booting"],
  off: ["○", "powered off"],
  "powering-off": ["↓", "powering off"],
  failed: ["✕", "power failed"],
};
const MOVING = new Set(["powering-on", "powering-off"]);
/** Which action each state allows (console/power/services.py refuses the others with a 409). */
const ALLOWED: Record<string, string[]> = {
  on: ["off", "force-off"],
  "powering-on": ["force-off"],
  off: ["on"],
  "powering-off": [],
  failed: ["on", "off", "force-off"],
};

function confirmation(action: string, init: Init): { title: string; message: string; undo: string; action: string } {
  const back = `Power it on again from this page; it boots in about ${init.boot_s} s.`;
  if (action === "on") {
    return {
      title: `Power on ${init.name}?`,
      message: `The BMC boots ${init.name}; its InfiniBand ports come up with the OS, about ${init.boot_s} s from now.`,
      undo: "Power it off again from this page once it is on.",
      action: "Power on",
    };
  }
  if (action === "off") {
    return {
      title: `Shut ${init.name} down?`,
      message: `The BMC asks the OS of ${init.name} to shut down. Its links go down on purpose (no alarm). A reservation that needs the node within its boot time refuses this.`,
      undo: back,
      action: "Shut down",
    };
  }
  return {
    title: `Force ${init.name} off?`,
    message: `The BMC cuts the power of ${init.name} at once: the OS does not shut down and anything unsaved on it is lost. A reservation that needs the node within its boot time refuses this.`,
    undo: back,
    action: "Force off",
  };
}

function show(state: string, changedAt: string | null | undefined): void {
  const el = byTestId("power-state");
  el.dataset.state = state;
  el.className = `power power-${state} power-big`;
  const [glyph, label] = WORDS[state] ?? ["", state];
  el.querySelector(".power-glyph")!.textContent = glyph;
  byTestId("power-label").textContent = label;
  if (changedAt) byTestId("power-since").textContent = `since ${changedAt.replace("T", " ").slice(0, 19)} UTC`;
  for (const button of document.querySelectorAll<HTMLButtonElement>("[data-power-action]")) {
    const allowed = (ALLOWED[state] ?? []).includes(button.dataset.powerAction ?? "");
    button.disabled = !allowed;
    button.title = allowed ? "" : `not while the node is ${label}`;
  }
}

function fail(message: string): void {
  const el = byTestId("power-error");
  el.textContent = message;
  el.hidden = !message;
}

async function follow(init: Init): Promise<void> {
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, init.poll_ms));
    try {
      const now = await api<NodePower>(init.api);
      show(now.power_state, now.changed_at);
      if (!MOVING.has(now.power_state)) {
        location.reload(); // the history table gains the BMC's answer
        return;
      }
    } catch {
      /* transient: ask again */
    }
  }
}

async function act(init: Init, action: string): Promise<void> {
  if (!(await confirmAction(confirmation(action, init)))) return;
  fail("");
  const reason = maybeTestId<HTMLInputElement>("power-reason")?.value ?? "";
  try {
    const now = await api<NodePower>(init.api, { method: "POST", body: JSON.stringify({ action, reason }) });
    show(now.power_state, now.changed_at);
    void follow(init);
  } catch (exc) {
    fail(exc instanceof ApiError ? exc.body.detail : String(exc));
  }
}

const initElement = document.getElementById("node-power-init");
if (initElement?.textContent) {
  const init = JSON.parse(initElement.textContent) as Init;
  if (init.can_act) {
    show(init.power_state, null);
    for (const button of document.querySelectorAll<HTMLButtonElement>("[data-power-action]")) {
      button.addEventListener("click", () => void act(init, button.dataset.powerAction ?? ""));
    }
    if (MOVING.has(init.power_state)) void follow(init);
  }
}
