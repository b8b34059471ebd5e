// The dashboard refreshes its figures by polling: every few seconds it fetches the page again and
// swaps the server-rendered figures in (one rendering, one set of links, no second template).
const POLL_MS = 3000;

export function pollDashboard(root: HTMLElement): void {
  let busy = false;
  const refresh = async (): Promise<void> => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const response = await fetch(window.location.pathname, {
        // the server skips what lies outside the swapped element (the energy card)
        headers: { Accept: "text/html", "X-Dashboard-Poll": "1" },
        credentials: "same-origin",
      });
      if (!response.ok) return;
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      const fresh = page.getElementById(root.id);
      if (fresh) {
        root.replaceChildren(...Array.from(fresh.childNodes).map((node) => document.importNode(node, true)));
        root.dataset.refreshedAt = new Date().toISOString();
      }
    } catch {
      // offline for a moment: the next poll tries again
    } finally {
      busy = false;
    }
  };
  window.setInterval(() => void refresh(), POLL_MS);
}
