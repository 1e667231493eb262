/**
 * Preloaded into every Node program a sandbox's commands start (NODE_OPTIONS `--require`, set
 * with the proxy variables: shared/tools/commands/environment.ts `proxyEnv`), so that Node's
 * `fetch` goes through the egress proxy like curl, git, npm and pip do. A Node that reads the
 * proxy variables itself when NODE_USE_ENV_PROXY=1 (22.21+ and 24.5+, also set) needs nothing;
 * an older one (20, the host's node under bwrap) resolves names itself in `fetch`, and the
 * sandbox has no DNS, so it would fail. There, the first `fetch` installs undici's
 * EnvHttpProxyAgent as the global dispatcher (the one Node's own fetch reads) — at the first
 * call, not at start, so programs that never fetch do not load undici. (A Node that reads the
 * variables itself tunnels http:// too, so a refusal there is a failed fetch naming the 403.)
 *
 * Plain `http.request` on such a Node still ignores the variables (as it always has); the
 * sandbox fails closed for it.
 */

const readsProxyVariables = (version: string): boolean => {
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  return major > 24 || (major === 24 && minor >= 5) || (major === 22 && minor >= 21);
};

function proxiedFetch(): void {
  const original = globalThis.fetch;
  if (typeof original !== 'function' || readsProxyVariables(process.version)) return;
  let installed = false;
  const fetch = function fetch(this: unknown, ...args: Parameters<typeof original>): ReturnType<typeof original> {
    if (!installed) {
      installed = true;
      try {
        // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded at the first fetch only
        const undici = require('undici') as typeof import('undici');
        // http:// forwarded as an absolute URI, as curl does, so a refusal arrives as the proxy's
        // 403 with its line rather than as a failed tunnel.
        undici.setGlobalDispatcher(new undici.EnvHttpProxyAgent({ proxyTunnel: false }));
      } catch {
        // No undici in this sandbox: fetch stays as Node made it (no network without a proxy).
      }
    }
    return original.apply(this, args);
  };
  globalThis.fetch = fetch as typeof original;
}

proxiedFetch();
