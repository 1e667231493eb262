/**
 * `toolgate shim --url URL`: a local agent's stdio server whose tools run behind a toolgate
 * gateway. Each stdin frame is one HTTPS POST; each answer one stdout line. Exits 0 when stdin
 * ends (after running requests settle, within the grace time) and on SIGTERM/SIGINT.
 */
import type { Config } from '../../shared/config';
import type { Logger } from '../../shared/log';
import { GatewayClient } from '../../shim/gateway-client';
import { Relay } from '../../shim/relay';
import { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, isLoopback, resolveShimSettings, ShimSettingsError } from '../../shim/settings';
import { StdioTransport } from '../../shared/transport/stdio';
import { parseFlags, UsageError } from '../flags';
import type { Command } from './command';

export const SHIM_USAGE = `Usage: toolgate shim --url URL [--ca FILE] [--timeout-ms N] [--connect-timeout-ms N]

  --url URL               the gateway, e.g. https://127.0.0.1:8443/ (Caddy) or http://127.0.0.1:3000/
  --ca FILE               trust this PEM CA instead of the system roots (e.g. Caddy's internal CA)
  --timeout-ms N          deadline for one request's reply (default ${DEFAULT_TIMEOUT_MS})
  --connect-timeout-ms N  deadline for connecting to the gateway (default ${DEFAULT_CONNECT_TIMEOUT_MS})

Environment:
  TOOLGATE_TOKEN          the bearer token (required; make one with generate-token)
  TOOLGATE_API_KEY        sent as X-API-Key when set (Caddy checks it)`;

export async function runShim(argv: readonly string[], config: Readonly<Config>, log: Logger): Promise<number> {
  const flags = parseFlags(argv, { values: ['url', 'ca', 'timeout-ms', 'connect-timeout-ms'] });
  const value = (name: string) => flags.get(name) as string | undefined;
  const options = await resolveShimSettings(
    { url: value('url'), ca: value('ca'), timeoutMs: value('timeout-ms'), connectTimeoutMs: value('connect-timeout-ms') },
    config.shim,
    // Replies may outgrow requests (several files in one); still, never buffer without bound.
    Math.max(64 * 1024 * 1024, 4 * config.protocol.maxMessageBytes),
  ).catch((err: unknown) => {
    throw err instanceof ShimSettingsError ? new UsageError(err.message) : err;
  });

  const gateway = new GatewayClient(options);
  if (options.url.protocol === 'http:' && !isLoopback(options.url)) {
    log.warn({ gateway: gateway.where }, 'plain http to another host: the token travels unencrypted');
  }
  const transport = new StdioTransport(process.stdin, process.stdout, config.protocol.maxMessageBytes);
  const relay = new Relay(transport, gateway, { drainMs: config.shutdownGraceMs, log });
  const stop = () => void relay.stop();
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  log.info({ gateway: gateway.where, apiKey: options.apiKey !== undefined, ca: options.ca !== undefined }, 'toolgate shim ready');
  await relay.start();
  await relay.finished();
  process.off('SIGTERM', stop);
  process.off('SIGINT', stop);
  return 0;
}

export const shimCommand: Command = { summary: 'relay a local agent over stdin/stdout to a toolgate gateway', usage: SHIM_USAGE, run: runShim };
