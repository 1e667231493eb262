/**
 * The environment a command sees: a fixed base plus what the caller passes. Never a copy of
 * `process.env`: the server's own variables (token secrets, Redis URLs, API keys) must not reach
 * a command, whichever process hosts the tool.
 *
 * The caller may set any valid name, LD_PRELOAD and PATH included: a command can already do the
 * same itself (`LD_PRELOAD=x prog` in a shell string), with the sandbox's rights and no more, so
 * refusing names here would add no protection.
 */
import type { Zod } from '../zod';

export const SANDBOX_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_ENV_VARS = 256;

export const envSchema = (z: Zod) =>
  z
    .record(
      z.string().regex(ENV_NAME, 'environment variable names must match ^[A-Za-z_][A-Za-z0-9_]*$'),
      z.string().refine((v) => !v.includes('\0'), 'environment values must not contain NUL bytes'),
    )
    .refine((env) => Object.keys(env).length <= MAX_ENV_VARS, `at most ${MAX_ENV_VARS} environment variables`)
    .describe(
      'Extra environment variables (names: letters, digits and _, not starting with a digit); they are added to a minimal base ' +
        '(PATH, HOME, LANG, SHLVL), nothing else is inherited',
    );

/**
 * The proxy variables of a sandbox whose agent relays its loopback port `port` to the executor's
 * egress proxy (executor/agent/egress-relay.ts). Both spellings, since tools read one or the
 * other (curl only the lower-case http_proxy, Python and npm either); loopback stays direct.
 * Node reads them with NODE_USE_ENV_PROXY=1 from 22.21 and 24.5 on; `fetchPreload`, the path of
 * executor/agent/fetch-proxy.js as the sandbox sees it, makes an older Node's fetch read them too.
 */
export function proxyEnv(port: number, fetchPreload?: string): Readonly<Record<string, string>> {
  const proxy = `http://127.0.0.1:${port}`;
  const direct = 'localhost,127.0.0.1,::1';
  return Object.freeze({
    NODE_USE_ENV_PROXY: '1',
    // Quoted as NODE_OPTIONS parses it (a path may hold spaces).
    ...(fetchPreload !== undefined ? { NODE_OPTIONS: `--require ${JSON.stringify(fetchPreload)}` } : {}),
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    ALL_PROXY: proxy,
    all_proxy: proxy,
    NO_PROXY: direct,
    no_proxy: direct,
  });
}

/**
 * HOME is the workspace and SHLVL is set so bash skips its slow rc probing (ENVIRONMENT.md: 77 ms
 * → 2 ms per spawn). `sandboxEnv`: what every command of this sandbox gets (its proxy variables);
 * the caller's `extra` comes last and may override it (a command that drops the proxy only loses
 * its own network: nothing else leaves the sandbox).
 */
export function commandEnv(
  home: string,
  extra: Readonly<Record<string, string>> | undefined,
  pty: boolean,
  sandboxEnv?: Readonly<Record<string, string>>,
): Record<string, string> {
  const env: Record<string, string> = { PATH: SANDBOX_PATH, HOME: home, LANG: 'C.UTF-8', SHLVL: '1' };
  if (pty) env.TERM = 'xterm-256color';
  if (sandboxEnv) Object.assign(env, sandboxEnv);
  // A plain object would let a key named __proto__ through as a prototype change, not a variable.
  for (const [name, value] of Object.entries(extra ?? {})) Object.defineProperty(env, name, { value, enumerable: true, writable: true, configurable: true });
  return env;
}

/**
 * The variables that make curl, git, OpenSSL, Python (requests, pip), Node and npm trust the
 * bundle at `bundlePath` (as the sandbox sees it). NODE_EXTRA_CA_CERTS adds to Node's own roots.
 */
export function trustEnv(bundlePath: string): Readonly<Record<string, string>> {
  return Object.freeze({
    SSL_CERT_FILE: bundlePath,
    CURL_CA_BUNDLE: bundlePath,
    GIT_SSL_CAINFO: bundlePath,
    REQUESTS_CA_BUNDLE: bundlePath,
    PIP_CERT: bundlePath,
    NODE_EXTRA_CA_CERTS: bundlePath,
    npm_config_cafile: bundlePath,
  });
}
