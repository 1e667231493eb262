/**
 * The product under test is the normal build in dist/ (`npm run build`), not the bench's own
 * compiled copy: the sandbox agent is found relative to dist/, and the processes the bench starts
 * are the ones a user runs. Modules are loaded from there with their source types.
 */
import { existsSync } from 'node:fs';
import * as path from 'node:path';

/** The repository root (dist-bench/bench/lib → three levels up). */
export const REPO_ROOT = path.resolve(__dirname, '../../..');
export const DIST = path.join(REPO_ROOT, 'dist');
export const TOOLGATE_BIN = path.join(DIST, 'bin/toolgate.js');

/** Loads dist/<rel>.js, typed as the source module `T`. */
export function productModule<T>(rel: string): T {
  const file = path.join(DIST, `${rel}.js`);
  if (!existsSync(file)) throw new Error(`${file} is missing: build first (npx tsc -p tsconfig.build.json)`);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(file) as T;
}

export function hasProduct(rel: string): boolean {
  return existsSync(path.join(DIST, `${rel}.js`));
}

/**
 * The node flags `toolgate serve` is started with where it is deployed (bin/node-flags.ts: the
 * service image, docker-compose.yml, `npm start`); the HTTP benchmarks start serve with them,
 * so they measure what a deployment runs. The executor and stdio run with V8's defaults.
 */
export function serveNodeFlags(): string[] {
  return [...productModule<typeof import('../../bin/node-flags')>('bin/node-flags').SERVE_NODE_FLAGS];
}
