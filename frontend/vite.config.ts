import { defineConfig } from "vite";

// Built into console/web/dist (inside the Python package, so `pip install .` ships it) and served
// by Django (django-vite reads the manifest, ServeStatic serves the files under /static/).
export default defineConfig({
  base: "/static/",
  build: {
    outDir: "../console/web/dist",
    emptyOutDir: true,
    manifest: "manifest.json",
    rollupOptions: {
      input: {
        main: "src/main.ts",
        designer: "src/designer/main.ts",
        reservations: "src/reservations/main.ts",
        live: "src/live/main.ts",
        apidocs: "src/apidocs.ts",
        fabric_change: "src/fabric_change.ts",
        copy: "src/copy.ts",
        usage: "src/usage.ts",
        power: "src/power.ts",
      },
    },
  },
});
