// The API docs page: drf-spectacular's Swagger UI files, loaded in order inside the console's frame.
// Script tags are not written into the template (the strict CSP rule: scripts come from bundles); the
// URLs arrive as data attributes and each file runs before the next is fetched.

import "./apidocs.css";

function load(src: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.onload = () => resolve();
    script.onerror = () => reject(new Error(`could not load ${src}`));
    document.body.append(script);
  });
}

async function start(): Promise<void> {
  const host = document.getElementById("swagger-ui");
  if (!host) return;
  const { bundle, standalone, init } = host.dataset;
  for (const src of [bundle, standalone, init]) if (src) await load(src);
}

void start();
