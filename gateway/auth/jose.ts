/**
 * jose, loaded on first use. jose 6 ships ES modules only, which this CommonJS build loads with
 * Node's require(esm) (Node ≥ 20.19 / 22.12): loading it lazily keeps a gateway without OAuth
 * starting on any Node the package supports; only verifying an OAuth token needs it.
 */
export type Jose = typeof import('jose');

let loading: Promise<Jose> | undefined;

export const jose = (): Promise<Jose> => (loading ??= import('jose'));
