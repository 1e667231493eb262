/**
 * undici, loaded on the first http_request rather than with the tool's definition: it is 110
 * modules and ~10 MiB resident, and most processes that list http_request never run it (the
 * gateway only routes calls; a stdio server may never get one).
 */
let undici: typeof import('undici') | undefined;

export function loadUndici(): typeof import('undici') {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load, on purpose (above)
  undici ??= require('undici') as typeof import('undici');
  return undici;
}
