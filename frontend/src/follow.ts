// A background job's page follows the job in place (no meta refresh: axe counts a timed refresh
// as a WCAG failure): [data-follow-job] names the job's JSON; its step and percent are updated
// every second, and when the job ends the page loads again, which then shows the result or why
// it failed.
export function followJob(box: HTMLElement): void {
  const url = box.dataset.followJob;
  if (!url) return;
  const tick = async (): Promise<void> => {
    try {
      const answer = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (answer.ok) {
        const job = (await answer.json()) as { state: string; step: string; percent: number };
        if (job.state === "done" || job.state === "failed") {
          location.reload();
          return;
        }
        const set = (testid: string, text: string) => {
          const el = box.querySelector<HTMLElement>(`[data-testid="${testid}"]`);
          if (el) el.textContent = text;
        };
        set("import-job-state", job.state);
        set("import-job-step", job.step);
        set("import-job-percent", String(job.percent));
        const bar = box.querySelector<HTMLProgressElement>("progress");
        if (bar) bar.value = job.percent;
      }
    } catch {
      // the next tick tries again (a restarting server, a dropped connection)
    }
    window.setTimeout(() => void tick(), 1000);
  };
  window.setTimeout(() => void tick(), 1000);
}
