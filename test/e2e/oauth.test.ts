/**
 * OAuth end to end, as a user would run it (issue 25): `toolgate serve` with
 * TOOLGATE_OAUTH_ISSUERS naming a real authorization server (oidc-provider, its own process),
 * and the official SDK 1.x client's own OAuth support — discovery from the 401, dynamic client
 * registration, authorization code with PKCE and the `resource` indicator (sign-in and consent
 * driven headlessly), step-up on a 403 — and a machine client with client credentials. Then
 * progress and tasks on /mcp, the attacks a real server makes possible, and the same on BullMQ
 * with `toolgate revoke --issuer --sub`. Opaque tokens from the same server are accepted by RFC 7662
 * introspection. Sandboxes are bwrap: each tenant its own workspace.
 */
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BIN, eventually, FaultStack } from '../faults/stack';
import { startOidcServer, OidcServer } from '../helpers/oidc-server';
import { describeRedis, startRedis, TestRedis } from '../helpers/redis';
import * as H from '../helpers/tasks-harness';

jest.setTimeout(90_000);

const ENV = { TOOLGATE_WORKSPACE_QUOTA_BYTES: '0', TOOLGATE_TASK_AFTER_MS: '800', TOOLGATE_TASK_POLL_MS: '200', TOOLGATE_PROGRESS_INTERVAL_MS: '300' };
const REDIRECT = 'http://127.0.0.1:9/callback';

/** A user's client: keeps what the SDK hands it and records where it was sent to sign in. */
class UserProvider implements OAuthClientProvider {
  readonly redirectUrl = REDIRECT;
  readonly clientMetadata: OAuthClientMetadata = {
    client_name: 'toolgate oauth test',
    redirect_uris: [REDIRECT],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  };
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  sentTo: URL[] = [];
  clientInformation = () => this.info;
  saveClientInformation = (info: OAuthClientInformationMixed) => void (this.info = info);
  tokens = () => this.saved;
  saveTokens = (tokens: OAuthTokens) => void (this.saved = tokens);
  redirectToAuthorization = (url: URL) => void this.sentTo.push(url);
  saveCodeVerifier = (v: string) => void (this.verifier = v);
  codeVerifier = () => this.verifier;
}

/**
 * The SDK's client-credentials provider asks for the scopes it was configured with (not the
 * challenge's): a machine client is set up with what it needs, and a 403 is final for it.
 */
const machine = (scope = 'file:read file:list file:write system:exec') =>
  new ClientCredentialsProvider({ clientId: 'machine', clientSecret: 'machine-secret', scope, expectedIssuer: issuerOfMachine });
/** The same, but the authorization server issues it opaque access tokens (introspected by toolgate). */
const opaqueMachine = (scope = 'file:read file:list file:write') =>
  new ClientCredentialsProvider({ clientId: 'opaque-machine', clientSecret: 'opaque-secret', scope, expectedIssuer: issuerOfMachine });
/** toolgate's own client at the fixture, for introspection. */
const INTROSPECTION = { TOOLGATE_OAUTH_INTROSPECTION_CLIENT_ID: 'toolgate', TOOLGATE_OAUTH_INTROSPECTION_CLIENT_SECRET: 'toolgate-secret' };
let issuerOfMachine = '';
const text = (result: unknown) => JSON.stringify(result);

async function connect(url: string, authProvider: OAuthClientProvider): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
  const client = new Client({ name: 'oauth-e2e', version: '1.0.0' });
  await client.connect(transport);
  return { client, transport };
}

describe('OAuth on the embedded bus', () => {
  let oidc: OidcServer;
  let stranger: OidcServer;
  let stack: FaultStack;
  let mcp: string;
  beforeAll(async () => {
    [oidc, stranger] = await Promise.all([startOidcServer(), startOidcServer()]);
    issuerOfMachine = oidc.issuer;
    stack = await FaultStack.start({ sandbox: 'bwrap', env: { ...ENV, ...INTROSPECTION, TOOLGATE_OAUTH_ISSUERS: oidc.issuer } });
    mcp = `${stack.url}mcp`;
  });
  afterAll(async () => {
    await stack?.close();
    await Promise.all([oidc?.close(), stranger?.close()]);
  });

  test('a user signs in with the SDK client: discovery, registration, PKCE, resource; a write steps up', async () => {
    const user = new UserProvider();
    const first = new StreamableHTTPClientTransport(new URL(mcp), { authProvider: user });
    await expect(new Client({ name: 'oauth-e2e', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(user.info?.client_id).toEqual(expect.any(String)); // registered dynamically
    const signIn = user.sentTo[0]!;
    expect(signIn.origin).toBe(oidc.issuer);
    expect(Object.fromEntries(signIn.searchParams)).toMatchObject({
      resource: mcp,
      scope: 'file:read file:list',
      code_challenge_method: 'S256',
      response_type: 'code',
    });
    const back = await oidc.consent(signIn, REDIRECT, 'alice');
    expect(back.searchParams.get('iss')).toBe(oidc.issuer);
    await first.finishAuth(back.searchParams.get('code')!);
    expect(user.saved?.access_token).toEqual(expect.any(String));

    const { client, transport } = await connect(mcp, user);
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toContain('read_file');
      expect(tools).not.toContain('write_file');
      expect(text(await client.callTool({ name: 'list_directory', arguments: { path: '.' } }))).not.toMatch(/isError":true/);
      // write_file needs file:write: 403 insufficient_scope → the SDK asks the user again, for more.
      await expect(client.callTool({ name: 'write_file', arguments: { path: 'alice.txt', content: 'from alice' } })).rejects.toBeInstanceOf(UnauthorizedError);
      const stepUp = user.sentTo[1]!;
      expect(stepUp.searchParams.get('scope')).toBe('file:read file:list file:write');
      expect(stepUp.searchParams.get('resource')).toBe(mcp);
      await transport.finishAuth((await oidc.consent(stepUp, REDIRECT, 'alice')).searchParams.get('code')!);
      const written = await client.callTool({ name: 'write_file', arguments: { path: 'alice.txt', content: 'from alice' } });
      expect(written.isError).toBeFalsy();
      expect(text(await client.callTool({ name: 'read_file', arguments: { path: 'alice.txt' } }))).toContain('from alice');
    } finally {
      await client.close();
    }
  });

  test('a machine client with client credentials: its configured scopes, a workspace of its own; too few scopes is a 403', async () => {
    const reader = await connect(mcp, machine('file:read file:list'));
    try {
      expect((await reader.client.listTools()).tools.map((t) => t.name)).not.toContain('write_file');
      await expect(reader.client.callTool({ name: 'write_file', arguments: { path: 'x.txt', content: 'x' } })).rejects.toThrow(/403/);
    } finally {
      await reader.client.close();
    }
    const { client } = await connect(mcp, machine());
    try {
      const written = await client.callTool({ name: 'write_file', arguments: { path: 'alice.txt', content: 'from machine' } });
      expect(written.isError).toBeFalsy();
      expect(text(await client.callTool({ name: 'read_file', arguments: { path: 'alice.txt' } }))).toContain('from machine');
      expect(text(await client.callTool({ name: 'read_file', arguments: { path: 'alice.txt' } }))).not.toContain('from alice');
    } finally {
      await client.close();
    }
  });

  test('progress over the event stream (SDK 1.x) and a task (2026-07-28 Tasks client) on /mcp', async () => {
    const { client } = await connect(mcp, machine());
    try {
      const seen: string[] = [];
      const result = await client.callTool({ name: 'run_command', arguments: { command: 'for i in 1 2 3; do echo "tick $i"; sleep 0.5; done' } }, undefined, {
        onprogress: (p) => void (p.message && seen.push(p.message)),
      });
      expect(text(result)).toContain('tick 3');
      expect(seen.some((m) => /tick [12]/.test(m))).toBe(true);
    } finally {
      await client.close();
    }
    const token = await oidc.machineToken(mcp, 'system:exec');
    const s = await H.modernTaskSession({ url: mcp }, token);
    try {
      const { execution, taskId } = await H.callTool(s, 'run_command', { command: 'sleep 1.5; echo tasked', timeout_ms: 30_000 });
      expect(taskId).toEqual(expect.any(String));
      const settled = await H.settle(execution);
      expect(settled.status).toBe('completed');
      expect(JSON.stringify(settled.result)).toContain('tasked');
    } finally {
      await s.close();
    }
  });

  test('an opaque access token (RFC 7662 introspection): the SDK client lists and calls tools; its own tenant; bad ones are 401', async () => {
    const token = await oidc.machineToken(mcp, 'file:read', 'opaque-machine');
    expect(token.split('.')).toHaveLength(1); // not a JWT
    const { client } = await connect(mcp, opaqueMachine());
    try {
      const tools = (await client.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(expect.arrayContaining(['read_file', 'write_file', 'list_directory']));
      expect(tools).not.toContain('run_command'); // system:exec was not asked for
      const written = await client.callTool({ name: 'write_file', arguments: { path: 'alice.txt', content: 'from opaque' } });
      expect(written.isError).toBeFalsy();
      // The tenant is oauth:<tag>:opaque-machine: not the JWT machine client's workspace.
      expect(text(await client.callTool({ name: 'read_file', arguments: { path: 'alice.txt' } }))).toContain('from opaque');
      expect(text(await client.callTool({ name: 'read_file', arguments: { path: 'alice.txt' } }))).not.toContain('from machine');
    } finally {
      await client.close();
    }
    const call = (bearer: string) =>
      fetch(mcp, {
        method: 'POST',
        headers: { Authorization: `Bearer ${bearer}`, 'Content-Type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      });
    expect((await call(token)).status).toBe(200);
    for (const [bad, why] of [
      ['made-up-opaque-token-0123456789', /not active/],
      [await oidc.machineToken(`${stack.url}other`, 'file:read', 'opaque-machine'), /audience does not name this server/],
    ] as const) {
      const res = await call(bad);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token", .*resource_metadata=/);
      expect(((await res.json()) as { error: { code: number; message: string } }).error).toMatchObject({ code: -32008, message: expect.stringMatching(why) });
    }
  });

  test('attacks: another audience, an issuer not configured, HS256 on /mcp, an OAuth token on POST /', async () => {
    const call = (url: string, token: string) =>
      fetch(url, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      });
    const expectInvalid = async (res: Response, why: RegExp) => {
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/error="invalid_token"/);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(why);
    };
    await expectInvalid(await call(mcp, await oidc.machineToken(`${stack.url}other`, 'file:read')), /audience does not name this server/);
    await expectInvalid(await call(mcp, await stranger.machineToken(mcp, 'file:read')), /issuer is not one this endpoint trusts/);
    await expectInvalid(await call(mcp, stack.token('someone')), /asymmetric/);
    const onRoot = await call(stack.url, await oidc.machineToken(mcp, 'file:read'));
    expect(onRoot.status).toBe(401);
    expect(onRoot.headers.get('www-authenticate')).not.toMatch(/resource_metadata/);
    // And the spec's own call still works beside it.
    expect((await call(stack.url, stack.token('someone'))).status).toBe(200);
  });
});

describeRedis('OAuth on BullMQ', () => {
  let redis: TestRedis;
  let oidc: OidcServer;
  let stack: FaultStack;
  let mcp: string;
  beforeAll(async () => {
    [redis, oidc] = await Promise.all([startRedis(), startOidcServer()]);
    issuerOfMachine = oidc.issuer;
    stack = await FaultStack.start({ redis, sandbox: 'bwrap', env: { ...ENV, TOOLGATE_OAUTH_ISSUERS: oidc.issuer } });
    mcp = `${stack.url}mcp`;
  });
  afterAll(async () => {
    await stack?.close();
    await Promise.all([oidc?.close(), redis?.close()]);
  });

  test('a machine client runs a command with progress across Redis; `toolgate revoke --issuer --sub` then refuses its tokens', async () => {
    const { client } = await connect(mcp, machine());
    try {
      const seen: string[] = [];
      const result = await client.callTool({ name: 'run_command', arguments: { command: 'for i in 1 2 3; do echo "bull $i"; sleep 0.5; done' } }, undefined, {
        onprogress: (p) => void (p.message && seen.push(p.message)),
      });
      expect(text(result)).toContain('bull 3');
      expect(seen.length).toBeGreaterThan(0);
    } finally {
      await client.close();
    }
    const token = await oidc.machineToken(mcp, 'file:read');
    const list = () =>
      fetch(mcp, {
        method: 'POST',
        headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
        body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      });
    expect((await list()).status).toBe(200);
    const { stdout } = await promisify(execFile)(process.execPath, [BIN, 'revoke', '--issuer', oidc.issuer, '--sub', 'machine'], {
      env: { PATH: process.env.PATH, TOOLGATE_REDIS_URL: redis.url, TOOLGATE_LOG_LEVEL: 'warn' },
    });
    expect(stdout).toMatch(/^revoked: tokens of "oauth:[A-Za-z0-9_-]{16}:machine"/);
    await eventually(async () => (await list()).status === 401, 'the revoked token to be refused');
    // A token issued after the cut-off's second works again.
    await new Promise((r) => setTimeout(r, 1100));
    const fresh = await oidc.machineToken(mcp, 'file:read');
    const res = await fetch(mcp, {
      method: 'POST',
      headers: { Authorization: `Bearer ${fresh}`, 'Content-Type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    });
    expect(res.status).toBe(200);
  });
});
