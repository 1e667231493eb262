/**
 * Deployments of the SDK 2.x client contract that reach toolgate over HTTP: the real
 * `toolgate serve` (and, with a Redis, `toolgate executor`) processes of test/faults/stack.ts,
 * each client with a token of its own tenant; or the `toolgate shim` in front of such a gateway.
 */
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { FaultStack } from '../faults/stack';
import type { TestRedis } from '../helpers/redis';
import { BIN } from '../stdio/server';
import type { Sdk2Deployment, Sdk2Settings } from './sdk2-client.suite';

/**
 * The identity every client of these deployments uses: their executors run on `none`, which
 * serves exactly one identity (README, Sandboxes), so clients share it (and its workspace)
 * instead of a tenant each.
 */
const NONE_IDENTITY = `sdk2-none-${process.pid}`;

/** `toolgate serve` on a free port: executor embedded, or on BullMQ with one `toolgate executor`. */
export async function startServe(settings: Sdk2Settings, redis?: TestRedis): Promise<FaultStack> {
  return FaultStack.start({ ...(redis ? { redis } : {}), env: { ...settings } });
}

/** Clients POST straight to the gateway, the bearer token in every request. */
export function httpDeployment(stack: FaultStack): Sdk2Deployment {
  const posts: Array<{ headers: Headers; body: string }> = [];
  // The SDK's own fetch call, recorded: what a proxy in front of toolgate would see.
  const recording = (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    if (init?.method === 'POST' && typeof init.body === 'string') posts.push({ headers: new Headers(init.headers), body: init.body });
    return fetch(input, init);
  };
  return {
    transport: (permissions) =>
      new StreamableHTTPClientTransport(new URL(stack.url), {
        requestInit: { headers: { Authorization: `Bearer ${stack.token(NONE_IDENTITY, permissions)}` } },
        fetch: recording,
      }),
    posts: () => posts,
    logs: () => stack.logs(),
    close: () => stack.close(),
  };
}

/** Clients spawn `toolgate shim --url` over stdio, as an agent would; the shim holds the token. */
export function shimDeployment(stack: FaultStack): Sdk2Deployment {
  let stderr = '';
  return {
    transport(permissions) {
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [BIN, 'shim', '--url', stack.url],
        env: { ...getDefaultEnvironment(), TOOLGATE_TOKEN: stack.token(NONE_IDENTITY, permissions), TOOLGATE_LOG_LEVEL: 'warn' },
        stderr: 'pipe',
      });
      transport.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-8000)));
      return transport;
    },
    logs: () => `--- shim\n${stderr}\n${stack.logs()}`,
    close: () => stack.close(),
  };
}
