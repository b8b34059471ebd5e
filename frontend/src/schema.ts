// The API's types, generated from docs/openapi.yaml (drf-spectacular's snapshot of the serializers)
// into generated/api.d.ts by `npm run generate`, which `npm run build` and `npm run typecheck` run
// first; the generated file is not committed. Pages alias these in their own types.ts instead of
// copying the serializers, so a serializer change that breaks a page fails `tsc --noEmit`.

import type { components } from "./generated/api";

export type Schemas = components["schemas"];
