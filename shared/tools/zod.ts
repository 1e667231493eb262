/**
 * zod, loaded when a tool's schema is first needed rather than with the tool's definition: it is
 * ~95 modules and ~10 MiB resident, and the sandbox agent never needs it (its caller, the
 * executor, has parsed every argument already: see executor/agent/main.ts). Each tool builds
 * its schemas from the `z` it is handed (tool.ts, `defineTool`), so importing a tool loads no zod.
 */
import type { z } from 'zod';

export type Zod = typeof z;

let loaded: Zod | undefined;

export function loadZod(): Zod {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
  loaded ??= (require('zod') as typeof import('zod')).z;
  return loaded;
}
