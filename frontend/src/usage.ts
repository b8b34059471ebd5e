// The usage page's charts: GPU-hours per UTC day, stacked by tenant (operators) or pool (tenants),
// and (operators, auditors) kWh per UTC day stacked by pool with the always-on kWh as a line.
// Their data is the page's json_script (strict CSP: no inline script); Chart.js draws on the canvas.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  type ChartDataset,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PointElement,
  Tooltip,
} from "chart.js";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, LineController, LineElement, PointElement, Legend, Tooltip);

interface Series {
  label: string;
  data: number[];
}
interface ChartData {
  days: string[];
  series: Series[];
  stack_by: string;
}
interface EnergyData {
  days: string[];
  series: Series[];
  always_on: number[];
}

// Distinguishable on white, in an order that keeps neighbours apart (Okabe–Ito, then extras).
const COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999933", "#882255", "#44AA99", "#777777"];

function bars(series: Series[], stack: string): ChartDataset<"bar" | "line", number[]>[] {
  return series.map((s, i) => ({
    type: "bar" as const,
    label: s.label,
    data: s.data,
    backgroundColor: COLOURS[i % COLOURS.length],
    pointStyle: "rect" as const,
    stack,
    order: 1,
  }));
}

// A stacked chart per UTC day: `unit` in the tooltips and on the y axis.
function drawDaily(canvasId: string, sourceId: string, unit: string, extra: (source: string) => ChartDataset<"bar" | "line", number[]>[] = () => []): void {
  const canvas = document.getElementById(canvasId) as HTMLCanvasElement | null;
  const source = document.getElementById(sourceId);
  if (!canvas || !source?.textContent) return;
  const data = JSON.parse(source.textContent) as ChartData | EnergyData;
  new Chart<"bar" | "line", number[], string>(canvas, {
    type: "bar",
    data: {
      labels: data.days.map((d) => d.slice(5)),
      datasets: [...extra(source.textContent), ...bars(data.series, unit)],
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      plugins: {
        // point styles: a square per bar series, a line for a line series (not a dashed box)
        legend: { position: "bottom", labels: { usePointStyle: true } },
        tooltip: {
          callbacks: {
            title: (items) => `${data.days[items[0]?.dataIndex ?? 0]} UTC`,
            label: (item) => `${item.dataset.label}: ${Number(item.raw).toFixed(1)} ${unit}`,
          },
        },
      },
      scales: {
        x: { stacked: true, title: { display: true, text: "day (UTC)" } },
        y: { stacked: true, beginAtZero: true, title: { display: true, text: unit } },
      },
    },
  });
  canvas.dataset.drawn = "true";
}

// The always-on kWh of all nodes, a dashed line over the pools' bars (its own stack).
function alwaysOn(source: string): ChartDataset<"bar" | "line", number[]>[] {
  const data = JSON.parse(source) as EnergyData;
  return [
    {
      type: "line" as const,
      label: "always on (all nodes)",
      data: data.always_on,
      borderColor: "#333333",
      backgroundColor: "#333333",
      borderDash: [6, 4],
      pointStyle: "line" as const,
      pointRadius: 0,
      pointHitRadius: 8,
      stack: "always",
      order: 0,
    },
  ];
}

document.addEventListener("DOMContentLoaded", () => {
  drawDaily("usage-chart", "usage-chart-data", "GPU-hours");
  drawDaily("energy-chart", "energy-chart-data", "kWh", alwaysOn);
});
