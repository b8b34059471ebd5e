// A background job's page follows the job in place (no meta refresh: axe counts a timed refresh
// as a WCAG failure): [data-follow-job] names the job's JSON (a large import's, a discovery's);
// its [data-job-field] elements (state, step, percent) and progress bar are updated every second,
// and when the job ends the page loads again, which then shows the result or why it failed.
export function followJob(box: HTMLElement): void {
  const url = box.dataset.followJob;
  if (!url) return;
  const tick = async (): Promise<void> => {
    try {
      const answer = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (answer.ok) {
        const job = (await answer.json()) as { state: string; step: string; percent?: number };
        if (job.state === "done" || job.state === "failed") {
          location.reload();
          return;
        }
        for (const el of box.querySelectorAll<HTMLElement>("[data-job-field]")) {
          const value = job[el.dataset.jobField as keyof typeof job];
          if (value !== undefined && value !== "") el.textContent = String(value);
        }
        const bar = box.querySelector<HTMLProgressElement>("progress");
        if (bar && job.percent !== undefined) bar.value = job.percent;
      }
    } catch {
      // the next tick tries again (a restarting server, a dropped connection)
    }
    window.setTimeout(() => void tick(), 1000);
  };
  window.setTimeout(() => void tick(), 1000);
}
