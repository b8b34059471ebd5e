// The usage page's chart: GPU-hours per UTC day, stacked by tenant (operators) or pool (tenants).
// Its data is the page's json_script (strict CSP: no inline script); Chart.js draws on the canvas.
import {
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  Legend,
  LinearScale,
  Tooltip,
} from "chart.js";

Chart.register(BarController, BarElement, CategoryScale, LinearScale, Legend, Tooltip);

interface Series {
  label: string;
  data: number[];
}
interface ChartData {
  days: string[];
  series: Series[];
  stack_by: string;
}

// Distinguishable on white, in an order that keeps neighbours apart (Okabe–Ito, then extras).
const COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999933", "#882255", "#44AA99", "#777777"];

function draw(): void {
  const canvas = document.getElementById("usage-chart") as HTMLCanvasElement | null;
  const source = document.getElementById("usage-chart-data");
  if (!canvas || !source?.textContent) return;
  const data = JSON.parse(source.textContent) as ChartData;
  new Chart(canvas, {
    type: "bar",
    data: {
      labels: data.days.map((d) => d.slice(5)),
      datasets: data.series.map((s, i) => ({
        label: s.label,
        data: s.data,
        backgroundColor: COLOURS[i % COLOURS.length],
        stack: "hours",
      })),
    },
    options: {
      responsive: true,
      maintainAspectRatio: false,
      animation: false,
      plugins: {
        legend: { position: "bottom" },
        tooltip: {
          callbacks: {
            title: (items) => `${data.days[items[0]?.dataIndex ?? 0]} UTC`,
            label: (item) => `${item.dataset.label}: ${Number(item.raw).toFixed(1)} GPU-hours`,
          },
        },
      },
      scales: {
        x: { stacked: true, title: { display: true, text: "day (UTC)" } },
        y: { stacked: true, beginAtZero: true, title: { display: true, text: "GPU-hours" } },
      },
    },
  });
  canvas.dataset.drawn = "true";
}

document.addEventListener("DOMContentLoaded", draw);
