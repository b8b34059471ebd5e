// One confirmation mechanism for every destructive action: a native <dialog> that says what the
// action will do and whether it can be undone. Scripts call confirmAction(); plain forms opt in
// with data-confirm="…" (and data-confirm-title / data-confirm-label), bound once for every page.
import { h } from "./dom";

export interface ConfirmOptions {
  title: string;
  message: string;
  /** What happens afterwards: how to undo it, or that it cannot be undone. */
  undo: string;
  /** The confirming button's label: the action's own verb ("Release", "Revoke"), never "OK". */
  action: string;
}

export function confirmAction(opts: ConfirmOptions): Promise<boolean> {
  const keep = h("button", { type: "submit", value: "keep", testid: "confirm-keep", autofocus: true }, "Keep it");
  const act = h("button", { type: "submit", value: "act", class: "danger", testid: "confirm-act" }, opts.action);
  const dialog = h(
    "dialog",
    { class: "confirm", testid: "confirm-dialog", "aria-labelledby": "confirm-title", "aria-describedby": "confirm-text" },
    h("form", { method: "dialog" },
      h("h2", { id: "confirm-title" }, opts.title),
      h("p", { id: "confirm-text", testid: "confirm-text" }, opts.message),
      h("p", { class: "muted", testid: "confirm-undo" }, opts.undo),
      h("div", { class: "toolbar" }, keep, act)),
  );
  document.body.append(dialog);
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "act");
      dialog.remove();
    }, { once: true });
    dialog.showModal();
  });
}

/** Forms with data-confirm submit only after the dialog's confirming button. */
export function bindConfirmForms(root: Document = document): void {
  root.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement) || form.dataset.confirm === undefined) return;
    ev.preventDefault();
    void confirmAction({
      title: form.dataset.confirmTitle ?? "Are you sure?",
      message: form.dataset.confirm,
      undo: form.dataset.confirmUndo ?? "This cannot be undone.",
      action: form.dataset.confirmLabel ?? "Confirm",
    }).then((ok) => {
      if (ok) form.submit(); // submit() fires no submit event: no second dialog
    });
  });
}
