// Copy buttons of server-rendered pages (strict CSP: no inline handlers). A button
// <button data-copy="ID"> copies the text of the element with that id; a status line
// [data-testid=copy-status] (aria-live) says what happened.

export async function copyText(text: string): Promise<boolean> {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // denied or unfocused: fall back to a selection
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed"; // through the CSSOM, which the CSP allows
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

export function wireCopyButtons(root: ParentNode = document): void {
  const status = root.querySelector<HTMLElement>('[data-testid="copy-status"]');
  for (const button of root.querySelectorAll<HTMLButtonElement>("button[data-copy]")) {
    button.addEventListener("click", () => {
      const target = document.getElementById(button.dataset.copy ?? "");
      const text = (target?.textContent ?? "").trim();
      void copyText(text).then((ok) => {
        const shown = text.length > 60 ? `${text.slice(0, 57)}…` : text;
        if (status) status.textContent = ok ? `Copied: ${shown}` : "Could not copy: select the text and copy it by hand.";
        button.textContent = ok ? "Copied" : "Copy failed";
        window.setTimeout(() => (button.textContent = "Copy"), 2000);
      });
    });
  }
  document.body.dataset.copy = "ready";
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", () => wireCopyButtons());
else wireCopyButtons();
