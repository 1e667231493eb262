/**
 * A real authorization server for tests: test/fixtures/oidc-provider.mjs (oidc-provider) in its
 * own process on 127.0.0.1, stopped by pid. Also the two things a test needs from it: a machine
 * token by client credentials, and the user's side of the authorization-code flow (sign-in and
 * consent), driven headlessly through the fixture's interaction endpoints.
 */
import { ChildProcess, spawn } from 'node:child_process';
import * as path from 'node:path';

const FIXTURE = path.resolve(__dirname, '../fixtures/oidc-provider.mjs');

export interface OidcServer {
  readonly issuer: string;
  readonly pid: number;
  /**
   * An access token for `resource` by client credentials: a JWT from the fixture's `machine`
   * client, an opaque one (for introspection) from `opaque-machine`.
   */
  machineToken(resource: string, scope: string, client?: 'machine' | 'opaque-machine'): Promise<string>;
  /** Signs `account` in and grants what the authorization request asked; resolves to the redirect back to the client (with `code`). */
  consent(authorizationUrl: URL | string, redirectUri: string, account?: string): Promise<URL>;
  close(): Promise<void>;
}

export async function startOidcServer(env: Record<string, string> = {}): Promise<OidcServer> {
  const child: ChildProcess = spawn(process.execPath, [FIXTURE], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const issuer = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`oidc-provider did not start within 20 s:\n${stderr}`)), 20_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /ready (\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once('exit', (code) => reject(new Error(`oidc-provider exited (${code}):\n${stderr}`)));
  });
  const close = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(killer);
  };
  return {
    issuer,
    pid: child.pid!,
    async machineToken(resource, scope, client = 'machine') {
      const secret = client === 'machine' ? 'machine-secret' : 'opaque-secret';
      const res = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { Authorization: `Basic ${Buffer.from(`${client}:${secret}`).toString('base64')}`, 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope, resource }),
      });
      const body = (await res.json()) as { access_token?: string };
      if (!body.access_token) throw new Error(`no token: ${JSON.stringify(body)}`);
      return body.access_token;
    },
    consent: (url, redirectUri, account = 'alice') => consent(new URL(url), redirectUri, account),
    close,
  };
}

/** Follows the authorization request through sign-in and consent with a cookie jar, as a browser would. */
async function consent(start: URL, redirectUri: string, account: string): Promise<URL> {
  const jar = new Map<string, string>();
  let url = start;
  let method = 'GET';
  for (let step = 0; step < 12; step++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { method, redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
    }
    const location = res.headers.get('location');
    if (location) {
      await res.body?.cancel();
      const next = new URL(location, url);
      if (next.href.startsWith(redirectUri)) return next;
      url = next;
      method = 'GET';
      continue;
    }
    const page = (await res.json()) as { uid?: string; prompt?: string };
    if (!page.uid) throw new Error(`unexpected answer from ${url.href}: ${res.status} ${JSON.stringify(page)}`);
    url = new URL(page.prompt === 'login' ? `/interaction/${page.uid}/login?account=${encodeURIComponent(account)}` : `/interaction/${page.uid}/confirm`, url);
    method = 'POST';
  }
  throw new Error('the authorization flow did not come back to the client');
}
